/* One option table per tool: it drives getopt_long and produces --help. */
#ifndef PYEBPF_OPTS_H
#define PYEBPF_OPTS_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct opt {
	int id;           /* handed to the tool's handler; a short option's own letter or OPT_* */
	char shortname;   /* 0 when there is none */
	const char *name; /* long name without dashes */
	const char *arg;  /* metavariable, or NULL for a flag */
	const char *help; /* one line */
};

/* Ids of the options every tool shares, with the same letters in every tool. */
enum {
	OPT_PID = 'p',
	OPT_ENV = 'e',
	OPT_DURATION = 'd',
	OPT_JSON = 'j',
	OPT_VERBOSE = 'v',
	OPT_HELP = 'h',
	OPT_VERSION = 'V',
	OPT_WIDE = 'w',
	OPT_KHEADERS = 1000,
	OPT_EBPF,
	OPT_FIELDS,
	OPT_TOOL_BASE = 1100, /* tools number their own long-only options from here */
};

#define OPT_ENTRY_PID { OPT_PID, 'p', "pid", "PID", "trace this process only (repeatable, or a comma list)" }
#define OPT_ENTRY_ENV { OPT_ENV, 'e', "env", "NAME", "tag every event with env=NAME" }
#define OPT_ENTRY_DURATION { OPT_DURATION, 'd', "duration", "SECONDS", "stop after SECONDS, fractions allowed; also a last operand (default: until Ctrl-C)" }
#define OPT_ENTRY_JSON { OPT_JSON, 'j', "json", NULL, "print one JSON object per line" }
#define OPT_ENTRY_KHEADERS { OPT_KHEADERS, 0, "kernel-headers", "DIR", "compile against the kernel headers in DIR" }
#define OPT_ENTRY_EBPF { OPT_EBPF, 0, "ebpf", NULL, "print the BPF program text and exit" }
#define OPT_ENTRY_FIELDS { OPT_FIELDS, 0, "fields", NULL, "list the fields of every record it prints and exit" }
#define OPT_ENTRY_VERBOSE { OPT_VERBOSE, 'v', "verbose", NULL, "say more on stderr about what is attached and why" }
#define OPT_ENTRY_HELP { OPT_HELP, 'h', "help", NULL, "show this help and exit" }
#define OPT_ENTRY_VERSION { OPT_VERSION, 'V', "version", NULL, "show the version and exit" }
/* In the tools whose default table leaves columns out to fit 120 characters. */
#define OPT_ENTRY_WIDE { OPT_WIDE, 'w', "wide", NULL, "print every column (the default table fits 120 characters)" }
#define OPT_END { 0, 0, NULL, NULL, NULL }

struct tool_doc {
	const char *name;     /* tool name, also the message prefix */
	const char *summary;  /* one line: what it answers */
	const char *operands; /* after [OPTIONS] in the usage line; NULL: only [DURATION] */
	const char *examples; /* lines of "  tool -x    # what it does" */
};

#define MAX_PIDS 64

struct sink_opts;

/* What the shared options set; tools embed this in their own settings. */
struct common_opts {
	pid_t pids[MAX_PIDS];
	int npids;
	const char *env;
	double duration_s; /* -d or the operand; 0: until a signal */
	bool json;
	const char *kernel_headers;
	bool print_ebpf;
	bool print_fields;
	bool wide; /* -w */
	/*
	 * --sqlite, --clickhouse-*, --ch-*, --also-stdout: the run layer's (src/run/
	 * sinkopts.h), which handles them; whoever owns the struct points this at its
	 * storage (NULL: the sink options are unknown options).
	 */
	struct sink_opts *sink;
};

/* Returns 0 when a handled option parsed, -1 after printing a usage error. */
typedef int (*opt_handler)(int id, const char *arg, void *ctx);

/*
 * Parses argv. Shared options go into *common; the others to handler. -h and -V
 * print and exit 0. Returns the index of the first operand, or -1 after a usage
 * error (already printed, with a hint to --help); the caller exits EXIT_USAGE.
 */
int opts_parse(const struct tool_doc *doc, const struct opt *table, int argc, char **argv,
	       struct common_opts *common, opt_handler handler, void *ctx);
void opts_print_help(FILE *f, const struct tool_doc *doc, const struct opt *table);

/* Number parsing with range checks; on error print "invalid --NAME 'ARG': ..." and return -1. */
int opts_parse_ulong(const char *name, const char *arg, unsigned long min, unsigned long max,
		     unsigned long *out);
int opts_parse_double(const char *name, const char *arg, double min, double max, double *out);

/*
 * A time in seconds as every tool takes it (-d, -i and the duration operand):
 * fractions allowed, from 1 ms to about 31 years.
 */
int opts_parse_seconds(const char *name, const char *arg, double *out);

/* A usage error about option NAME; prints and returns -1. */
int opts_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
