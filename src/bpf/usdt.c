#define _GNU_SOURCE
#include "usdt.h"

#include <bcc/bcc_elf.h>
#include <bcc/bcc_syms.h>
#include <bcc/bcc_usdt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "symbols.h"

struct usdt_site {
	char *binary;    /* the file the uprobe goes on */
	uint64_t offset; /* file offset of the probe location */
	uint32_t ref_ctr; /* file offset of the semaphore, 0 when there is none */
	pid_t pid;       /* -1: every process */
	char *fn;        /* the generated BPF entry function */
	char *probe;     /* provider:name */
};

static void site_free(struct usdt_site *s)
{
	free(s->binary);
	free(s->fn);
	free(s->probe);
}

struct usdt {
	struct usdt_site *sites;
	int nsites, capsites;
	char *text; /* generated entry functions */
	size_t textlen;
	unsigned seq;
};

struct usdt *usdt_new(void)
{
	return calloc(1, sizeof(struct usdt));
}

void usdt_free(struct usdt *u)
{
	if (!u)
		return;
	for (int i = 0; i < u->nsites; i++)
		site_free(&u->sites[i]);
	free(u->sites);
	free(u->text);
	free(u);
}

static int text_append(struct usdt *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int text_append(struct usdt *u, const char *fmt, ...)
{
	va_list ap;
	char *s, *t;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	t = realloc(u->text, u->textlen + (size_t)n + 1);
	if (!t) {
		free(s);
		return -1;
	}
	memcpy(t + u->textlen, s, (size_t)n + 1);
	u->text = t;
	u->textlen += (size_t)n;
	free(s);
	return 0;
}

/*
 * What the notes say about one probe. bcc_usdt_foreach's callback takes no cookie;
 * bcc_elf_foreach_usdt's does: this query is its payload, on the caller's stack, so
 * no state outlives a call (two trackers may plan probes in one process).
 */
struct probe_query {
	const char *provider, *name;  /* what is looked for */
	int notes;                    /* its locations: one note each */
	int nargs;                    /* arguments of the first note's spec */
	uint64_t semaphore;           /* virtual address of its semaphore, 0 when ungated */
	uint64_t semaphore_offset;    /* file offset of it, 0 when unknown */
};

static void on_note(const char *path, const struct bcc_elf_usdt *n, void *payload)
{
	struct probe_query *q = payload;

	(void)path;
	if (strcmp(n->provider, q->provider) || strcmp(n->name, q->name) || q->notes++)
		return;
	q->semaphore = n->semaphore;
	q->semaphore_offset = n->semaphore_offset;
	/* the spec is space-separated, one "SIZE@OPERAND" per argument */
	for (const char *a = n->arg_fmt; a && *a;) {
		a += strspn(a, " \t");
		if (*a)
			q->nargs++;
		a += strcspn(a, " \t");
	}
}

/* Reads binary's notes for provider:probe; how many locations it has (0: none), or -1. */
static int probe_query(const char *binary, const char *provider, const char *probe,
		       struct probe_query *q)
{
	*q = (struct probe_query){ .provider = provider, .name = probe };
	if (!symbols_elf_sane(binary) || bcc_elf_foreach_usdt(binary, on_note, q) < 0)
		return -1;
	return q->notes;
}

bool usdt_binary_has_probe(const char *binary, const char *provider, const char *probe)
{
	struct probe_query q;

	return probe_query(binary, provider, probe, &q) > 0;
}

/*
 * Index of a register in the x86_64 struct pt_regs (the uapi layout, which is the
 * kernel's): r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs flags sp.
 * libbcc hands register names normalized ("ax", "r12") or as written ("%eax", "r12d");
 * every width maps to its 64-bit register, the argument size does the truncation.
 */
static int reg_index(const char *name)
{
	static const struct {
		const char *names[5];
		int index;
	} regs[] = {
		{ { "rax", "eax", "ax", "al" }, 10 },   { { "rbx", "ebx", "bx", "bl" }, 5 },
		{ { "rcx", "ecx", "cx", "cl" }, 11 },   { { "rdx", "edx", "dx", "dl" }, 12 },
		{ { "rsi", "esi", "si", "sil" }, 13 },  { { "rdi", "edi", "di", "dil" }, 14 },
		{ { "rbp", "ebp", "bp", "bpl" }, 4 },   { { "rsp", "esp", "sp", "spl" }, 19 },
		{ { "rip", "eip", "ip" }, 16 },
	};
	static const int rn[] = { 9, 8, 7, 6, 3, 2, 1, 0 }; /* r8..r15 */
	char base[16];
	size_t len;

	if (!name)
		return -1;
	if (*name == '%')
		name++;
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		for (int j = 0; j < 5 && regs[i].names[j]; j++)
			if (!strcmp(name, regs[i].names[j]))
				return regs[i].index;
	/* r8..r15 with an optional d/w/b width suffix */
	len = strlen(name);
	if (len < 2 || len >= sizeof(base) || name[0] != 'r')
		return -1;
	strcpy(base, name);
	if (strchr("dwb", base[len - 1]))
		base[len - 1] = 0;
	{
		char *end;
		long n = strtol(base + 1, &end, 10);
		if (*end || n < 8 || n > 15)
			return -1;
		return rn[n - 8];
	}
}

static const char *arg_ctype(int size)
{
	switch (size) {
	case 1: return "u8";
	case -1: return "s8";
	case 2: return "u16";
	case -2: return "s16";
	case 4: return "u32";
	case -4: return "s32";
	case 8: return "u64";
	case -8: return "s64";
	}
	return NULL;
}

/* One statement that stores argument j into args[j]; -1 when the spec is not supported. */
static int gen_arg(struct usdt *u, int j, const struct bcc_usdt_argument *a)
{
	const char *type = arg_ctype(a->size);
	int base = -1, index = -1;
	char idx[48] = "";

	if (!type)
		return -1;
	if (a->valid & BCC_USDT_ARGUMENT_DEREF_IDENT)
		return -1; /* symbol(%rip): needs the load address, not known system-wide */
	if (a->valid & BCC_USDT_ARGUMENT_BASE_REGISTER_NAME) {
		base = reg_index(a->base_register_name);
		if (base < 0)
			return -1;
	}
	if (a->valid & BCC_USDT_ARGUMENT_INDEX_REGISTER_NAME) {
		index = reg_index(a->index_register_name);
		if (index < 0)
			return -1;
	}
	if (base < 0) {
		if (!(a->valid & BCC_USDT_ARGUMENT_CONSTANT))
			return -1;
		return text_append(u, "\targs[%d] = (s64)(%s)%lldll;\n", j, type, a->constant);
	}
	if (!(a->valid & BCC_USDT_ARGUMENT_DEREF_OFFSET) && index < 0)
		return text_append(u, "\targs[%d] = (s64)(%s)regs[%d];\n", j, type, base);
	if (index >= 0)
		snprintf(idx, sizeof(idx), " + regs[%d] * %d", index,
			 (a->valid & BCC_USDT_ARGUMENT_SCALE) ? a->scale : 1);
	return text_append(u,
			   "\t{\n\t\t%s v = 0;\n"
			   "\t\tu64 a = regs[%d] + (s64)%d%s;\n"
			   "\t\tbpf_probe_read_user(&v, sizeof(v), (void *)a);\n"
			   "\t\targs[%d] = (s64)v;\n\t}\n",
			   type, base, (a->valid & BCC_USDT_ARGUMENT_DEREF_OFFSET) ? a->deref_offset : 0,
			   idx, j);
}

static int add_site(struct usdt *u, const char *binary, uint64_t offset, uint32_t ref_ctr,
		    pid_t pid, const char *fn, const char *provider, const char *probe)
{
	struct usdt_site *s;

	if (u->nsites == u->capsites) {
		int cap = u->capsites ? 2 * u->capsites : 8;
		struct usdt_site *v = realloc(u->sites, (size_t)cap * sizeof(*v));
		if (!v)
			return -1;
		u->sites = v, u->capsites = cap;
	}
	s = &u->sites[u->nsites];
	*s = (struct usdt_site){ strdup(binary), offset, ref_ctr, pid > 0 ? pid : -1, strdup(fn), NULL };
	if (asprintf(&s->probe, "%s:%s", provider, probe) < 0)
		s->probe = NULL;
	if (!s->binary || !s->fn || !s->probe) {
		site_free(s);
		return -1;
	}
	u->nsites++;
	return 0;
}

int usdt_add(struct usdt *u, const char *binary, pid_t pid, const char *provider,
	     const char *probe, const char *handler)
{
	void *ctx = symbols_elf_sane(binary) ? bcc_usdt_new_frompath(binary) : NULL;
	struct probe_query info;
	/* on failure, what this call added is taken back: the text must stay compilable */
	size_t textlen = u->textlen;
	int nsites = u->nsites, rc = -1;

	if (!ctx) {
		log_error("cannot read the USDT notes of %s", binary);
		return -1;
	}
	if (probe_query(binary, provider, probe, &info) <= 0) {
		bcc_usdt_close(ctx);
		return 1;
	}
	if (info.nargs > USDT_MAX_ARGS) {
		log_error("USDT %s:%s in %s has %d arguments, at most %d are supported", provider,
			  probe, binary, info.nargs, USDT_MAX_ARGS);
		goto out;
	}
	if (info.semaphore && !info.semaphore_offset) {
		log_error("USDT %s:%s in %s: the semaphore's file offset is unknown", provider,
			  probe, binary);
		goto out;
	}
	for (int i = 0; i < info.notes; i++) {
		struct bcc_usdt_location loc;
		uint64_t offset;
		char fn[128];

		if (bcc_usdt_get_location(ctx, provider, probe, i, &loc) ||
		    symbols_file_offset(loc.bin_path ? loc.bin_path : binary, NULL, loc.address, &offset)) {
			log_error("USDT %s:%s in %s: location %d cannot be mapped to the file",
				  provider, probe, binary, i);
			goto out;
		}
		/* one entry function per location: no dispatch on the instruction pointer */
		snprintf(fn, sizeof(fn), "usdt_%s_%u_%d", handler, u->seq, i);
		if (text_append(u,
				"\nint %s(struct pt_regs *ctx)\n{\n"
				"\tconst u64 *regs = (const u64 *)ctx;\n"
				"\ts64 args[%d] = {};\n",
				fn, USDT_MAX_ARGS))
			goto out;
		/* libbcc drops an argument it cannot parse: one missing here is refused */
		for (int j = 0; j < info.nargs; j++) {
			struct bcc_usdt_argument arg;

			if (bcc_usdt_get_argument(ctx, provider, probe, i, j, &arg) ||
			    gen_arg(u, j, &arg)) {
				log_error("USDT %s:%s in %s: argument %d has a form this tool cannot read",
					  provider, probe, binary, j + 1);
				goto out;
			}
		}
		if (text_append(u, "\treturn %s(ctx, args);\n}\n", handler) ||
		    add_site(u, loc.bin_path ? loc.bin_path : binary, offset,
			     (uint32_t)info.semaphore_offset, pid, fn, provider, probe))
			goto out;
		log_debug("USDT %s:%s at %s+0x%llx (semaphore at file offset 0x%llx, pid %d)",
			  provider, probe, binary, (unsigned long long)offset,
			  (unsigned long long)info.semaphore_offset, pid);
	}
	u->seq++;
	rc = 0;
out:
	if (rc) {
		if (u->text)
			u->text[textlen] = 0;
		u->textlen = textlen;
		while (u->nsites > nsites)
			site_free(&u->sites[--u->nsites]);
	}
	bcc_usdt_close(ctx);
	return rc;
}

char *usdt_text(const struct usdt *u, const char *tool_text)
{
	char *s;

	if (asprintf(&s, "%s\n/* USDT entry functions (src/bpf/usdt.c) */%s", tool_text,
		     u->text ? u->text : "\n") < 0)
		return NULL;
	return s;
}

int usdt_locations(const struct usdt *u)
{
	return u->nsites;
}

int usdt_location(const struct usdt *u, int i, struct usdt_location *out)
{
	const struct usdt_site *s;

	if (i < 0 || i >= u->nsites)
		return -1;
	s = &u->sites[i];
	*out = (struct usdt_location){ s->binary, s->probe, s->offset, s->ref_ctr, s->pid, s->fn };
	return 0;
}
