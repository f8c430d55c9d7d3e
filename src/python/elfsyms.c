#include "elfsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols.h"

struct elf_segment {
	uint64_t vaddr, offset, filesz, memsz;
	uint32_t flags; /* PF_R/PF_W/PF_X */
};

struct elfsyms {
	struct elf_symbol *syms; /* sorted by name */
	size_t nsyms;
	char *strings;           /* all names, NUL-separated */
	size_t strings_len, strings_cap;
	struct elf_segment *segs;
	int nsegs;
	bool has_symtab, has_usdt, is_exec;
};

static int cmp_sym(const void *a, const void *b)
{
	const struct elf_symbol *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	/* for equal names, the .dynsym one first (it is what the dynamic linker uses) */
	return c ? c : (int)y->dynamic - (int)x->dynamic;
}

static size_t add_string(struct elfsyms *e, const char *s, size_t n)
{
	size_t at = e->strings_len;

	if (e->strings_len + n + 1 > e->strings_cap) {
		size_t cap = e->strings_cap ? e->strings_cap * 2 : 65536;
		while (cap < e->strings_len + n + 1)
			cap *= 2;
		char *p = realloc(e->strings, cap);
		if (!p)
			return SIZE_MAX;
		e->strings = p;
		e->strings_cap = cap;
	}
	memcpy(e->strings + at, s, n);
	e->strings[at + n] = 0;
	e->strings_len += n + 1;
	return at;
}

static int read_symbols(struct elfsyms *e, Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, size_t *cap)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n;

	if (!data || !sh->sh_entsize)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym s;
		const char *name;
		size_t len, at;
		int type;

		if (!gelf_getsym(data, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_name)
			continue;
		type = GELF_ST_TYPE(s.st_info);
		if (type != STT_FUNC && type != STT_OBJECT && type != STT_NOTYPE && type != STT_GNU_IFUNC)
			continue;
		name = elf_strptr(elf, sh->sh_link, s.st_name);
		if (!name || !*name)
			continue;
		len = strcspn(name, "@");
		at = add_string(e, name, len);
		if (at == SIZE_MAX)
			return -1;
		if (e->nsyms == *cap) {
			size_t c = *cap ? *cap * 2 : 4096;
			struct elf_symbol *p = realloc(e->syms, c * sizeof(*p));
			if (!p)
				return -1;
			e->syms = p;
			*cap = c;
		}
		/* names are fixed up to pointers once the string buffer stops moving */
		e->syms[e->nsyms++] = (struct elf_symbol){
			.name = (const char *)(uintptr_t)at,
			.value = s.st_value,
			.size = s.st_size,
			.func = type == STT_FUNC || type == STT_GNU_IFUNC,
			.dynamic = sh->sh_type == SHT_DYNSYM,
		};
	}
	return 0;
}

struct elfsyms *elfsyms_open(const char *path)
{
	struct elfsyms *e;
	Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	size_t phnum, shstrndx, cap = 0;
	int fd, err = 0;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = ENOSYS;
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e) {
		close(fd);
		return NULL;
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    elf_getphdrnum(elf, &phnum) || elf_getshdrstrndx(elf, &shstrndx)) {
		err = ENOEXEC;
		goto fail;
	}
	e->is_exec = eh.e_type == ET_EXEC;
	e->segs = calloc(phnum ? phnum : 1, sizeof(*e->segs));
	if (!e->segs) {
		err = ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			e->segs[e->nsegs++] = (struct elf_segment){ ph.p_vaddr, ph.p_offset, ph.p_filesz,
								    ph.p_memsz, ph.p_flags };
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (sh.sh_type == SHT_NOTE && name && !strcmp(name, ".note.stapsdt"))
			e->has_usdt = true;
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) {
			if (sh.sh_type == SHT_SYMTAB)
				e->has_symtab = true;
			if (read_symbols(e, elf, scn, &sh, &cap)) {
				err = ENOMEM;
				goto fail;
			}
		}
	}
	for (size_t i = 0; i < e->nsyms; i++)
		e->syms[i].name = e->strings + (uintptr_t)e->syms[i].name;
	if (e->nsyms) /* syms is NULL without any (qsort's is nonnull: tests/fuzz/corpus/elf/no-symbols) */
		qsort(e->syms, e->nsyms, sizeof(*e->syms), cmp_sym);
	elf_end(elf);
	close(fd);
	return e;
fail:
	if (elf)
		elf_end(elf);
	close(fd);
	elfsyms_close(e);
	errno = err;
	return NULL;
}

void elfsyms_close(struct elfsyms *e)
{
	if (!e)
		return;
	free(e->syms);
	free(e->strings);
	free(e->segs);
	free(e);
}

const struct elf_symbol *elfsyms_find(const struct elfsyms *e, const char *name)
{
	size_t lo = 0, hi = e->nsyms;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(e->syms[mid].name, name);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the first match: .dynsym before .symtab, a sized definition preferred */
	for (size_t i = lo; i < e->nsyms && !strcmp(e->syms[i].name, name); i++)
		if (e->syms[i].value)
			return &e->syms[i];
	return NULL;
}

bool elfsyms_has_symtab(const struct elfsyms *e)
{
	return e->has_symtab;
}

bool elfsyms_has_usdt(const struct elfsyms *e)
{
	return e->has_usdt;
}

bool elfsyms_is_exec(const struct elfsyms *e)
{
	return e->is_exec;
}

int elfsyms_bias(const struct elfsyms *e, uint64_t map_start, uint64_t map_offset, uint64_t *bias)
{
	for (int i = 0; i < e->nsegs; i++) {
		const struct elf_segment *s = &e->segs[i];
		/* mmap starts at the page holding the segment's first byte */
		if (s->offset >= map_offset && s->offset - map_offset < 4096 &&
		    (s->vaddr & 4095) == (s->offset & 4095)) {
			*bias = map_start + (s->offset - map_offset) - s->vaddr;
			return 0;
		}
	}
	return -1;
}

/* The st_value of the default-version definition of name in .dynsym (0: none). */
static uint64_t default_version_value(Elf *elf, const char *name)
{
	Elf_Scn *scn = NULL, *dynsym = NULL;
	Elf_Data *syms, *vers = NULL;
	GElf_Shdr dsh = { 0 }, sh;
	uint64_t found = 0;

	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM)
			dynsym = scn, dsh = sh;
		else if (sh.sh_type == SHT_GNU_versym)
			vers = elf_getdata(scn, NULL);
	}
	if (!dynsym || !(syms = elf_getdata(dynsym, NULL)) || !dsh.sh_entsize)
		return 0;
	for (size_t i = 0; i < dsh.sh_size / dsh.sh_entsize; i++) {
		GElf_Sym s;
		GElf_Versym v = 0;
		const char *n;

		if (!gelf_getsym(syms, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value)
			continue;
		n = elf_strptr(elf, dsh.sh_link, s.st_name);
		if (!n || strcmp(n, name))
			continue;
		/* the hidden bit marks the old versions (name@VER); the default is name@@VER */
		if (vers && !gelf_getversym(vers, (int)i, &v))
			continue;
		if (!(v & 0x8000))
			return s.st_value;
		if (!found)
			found = s.st_value;
	}
	return found;
}

int elfsyms_default_func_offset(const char *path, const char *name, uint64_t *offset)
{
	uint64_t value = 0;
	Elf *elf;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF)
		value = default_version_value(elf, name);
	if (elf)
		elf_end(elf);
	close(fd);
	return value ? symbols_file_offset(path, NULL, value, offset) : -1;
}

int elfsyms_section(const char *path, const char *name, uint64_t *vaddr, uint64_t *size)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *elf;
	int fd, r = -1;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF && !elf_getshdrstrndx(elf, &shstrndx))
		while (r && (scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			const char *n;
			if (!gelf_getshdr(scn, &sh))
				continue;
			n = elf_strptr(elf, shstrndx, sh.sh_name);
			if (n && !strcmp(n, name)) {
				*vaddr = sh.sh_addr;
				*size = sh.sh_size;
				r = 0;
			}
		}
	if (elf)
		elf_end(elf);
	close(fd);
	return r;
}
