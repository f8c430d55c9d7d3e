/*
 * The parts of an ELF file a tracer needs: symbols (.dynsym and .symtab), the
 * PT_LOAD segments (to turn a mapping into a load bias, also when patchelf added
 * segments), and whether USDT notes are present. Read once with libelf, then closed.
 */
#ifndef PYEBPF_ELFSYMS_H
#define PYEBPF_ELFSYMS_H

#include <stdbool.h>
#include <stdint.h>

struct elfsyms;

struct elf_symbol {
	const char *name;
	uint64_t value; /* st_value: the ELF virtual address */
	uint64_t size;
	bool func;      /* STT_FUNC (else data) */
	bool dynamic;   /* from .dynsym */
};

/* NULL (errno set) when path is not a readable ELF file. */
struct elfsyms *elfsyms_open(const char *path);
void elfsyms_close(struct elfsyms *e);

/* A defined symbol by exact name (version suffixes "@..." are ignored), or NULL. */
const struct elf_symbol *elfsyms_find(const struct elfsyms *e, const char *name);
bool elfsyms_has_symtab(const struct elfsyms *e);
bool elfsyms_has_usdt(const struct elfsyms *e);
bool elfsyms_is_exec(const struct elfsyms *e); /* ET_EXEC: fixed addresses */

/*
 * The load bias of a mapping that starts at map_start and maps the file from
 * map_offset (as in /proc/PID/maps): the PT_LOAD segment that begins in that page
 * tells which virtual address the mapping holds. 0, or -1 when no segment matches.
 */
int elfsyms_bias(const struct elfsyms *e, uint64_t map_start, uint64_t map_offset, uint64_t *bias);

/* The virtual address and size of section name of the file at path: 0, or -1 when it has none. */
int elfsyms_section(const char *path, const char *name, uint64_t *vaddr, uint64_t *size);

/*
 * File offset (for uprobes) of the default version of function name in path's .dynsym:
 * name@@VER, not an older name@VER compat one (glibc exports pthread_cond_timedwait
 * twice, and programs linked today call the @@GLIBC_2.3.2 one); the offset is
 * symbols_file_offset()'s. 0, or -1 when none.
 */
int elfsyms_default_func_offset(const char *path, const char *name, uint64_t *offset);

#endif
