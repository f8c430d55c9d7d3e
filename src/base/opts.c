#include "opts.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#ifndef PYEBPF_VERSION
#define PYEBPF_VERSION "0.0.0"
#endif

#define MAX_OPTS 64

int opts_usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", log_progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", log_progname);
	return -1;
}

int opts_parse_ulong(const char *name, const char *arg, unsigned long min, unsigned long max,
		     unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v < min || v > max)
		return opts_usage_error("invalid --%s '%s': expected a whole number from %lu to %lu",
					name, arg, min, max);
	*out = v;
	return 0;
}

int opts_parse_double(const char *name, const char *arg, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(v) || v < min || v > max)
		return opts_usage_error("invalid --%s '%s': expected a number from %g to %g", name,
					arg, min, max);
	*out = v;
	return 0;
}

int opts_parse_seconds(const char *name, const char *arg, double *out)
{
	return opts_parse_double(name, arg, 0.001, 1e9, out);
}

static int add_pids(struct common_opts *c, const char *arg)
{
	char buf[1024], *tok, *save = NULL;
	unsigned long pid;
	int added = 0;

	if (strlen(arg) >= sizeof(buf))
		return opts_usage_error("invalid --pid '%s': too long", arg);
	strcpy(buf, arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (opts_parse_ulong("pid", tok, 1, INT_MAX, &pid))
			return -1;
		if (c->npids == MAX_PIDS)
			return opts_usage_error("too many --pid values (at most %d)", MAX_PIDS);
		c->pids[c->npids++] = (pid_t)pid;
		added++;
	}
	/* `-p "$(pgrep x)"` finding nothing must not trace the whole host */
	if (!added)
		return opts_usage_error("invalid --pid '%s': no process id in it", arg);
	return 0;
}

/* Returns 1 when the option is a shared one (handled), 0 when it is the tool's, -1 on error. */
static int handle_common(struct common_opts *c, int id, const char *arg)
{
	switch (id) {
	case OPT_PID:
		return add_pids(c, arg) ? -1 : 1;
	case OPT_ENV:
		c->env = arg;
		return 1;
	case OPT_DURATION:
		return opts_parse_seconds("duration", arg, &c->duration_s) ? -1 : 1;
	case OPT_JSON:
		c->json = true;
		return 1;
	case OPT_KHEADERS:
		c->kernel_headers = arg;
		return 1;
	case OPT_EBPF:
		c->print_ebpf = true;
		return 1;
	case OPT_FIELDS:
		c->print_fields = true;
		return 1;
	case OPT_VERBOSE:
		log_verbose = true;
		return 1;
	case OPT_WIDE:
		c->wide = true;
		return 1;
	}
	return 0;
}

void opts_print_help(FILE *f, const struct tool_doc *doc, const struct opt *table)
{
	const struct opt *o;

	fprintf(f, "Usage: %s [OPTIONS] %s\n%s\n\nOptions:\n", doc->name,
		doc->operands ? doc->operands : "[DURATION]", doc->summary);
	for (o = table; o->name; o++) {
		char left[64];
		int n = snprintf(left, sizeof(left), "%c%c%s--%s%s%s", o->shortname ? '-' : ' ',
				 o->shortname ? o->shortname : ' ', o->shortname ? ", " : "  ",
				 o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %s%*s %s\n", left, n < 26 ? 26 - n : 0, "", o->help);
	}
	if (doc->examples)
		fprintf(f, "\nExamples:\n%s", doc->examples);
}

int opts_parse(const struct tool_doc *doc, const struct opt *table, int argc, char **argv,
	       struct common_opts *common, opt_handler handler, void *ctx)
{
	struct option longopts[MAX_OPTS + 1];
	char shortopts[2 * MAX_OPTS + 2] = ":";
	size_t ns = 1;
	int n = 0, c, r;

	log_progname = doc->name;
	for (const struct opt *o = table; o->name && n < MAX_OPTS; o++, n++) {
		longopts[n] = (struct option){ o->name, o->arg ? required_argument : no_argument,
					       NULL, o->id };
		if (o->shortname) {
			shortopts[ns++] = o->shortname;
			if (o->arg)
				shortopts[ns++] = ':';
		}
	}
	longopts[n] = (struct option){ 0 };
	shortopts[ns] = 0;

	opterr = 0;
	/* 0, not 1: glibc then also forgets where it was in a cluster like -jd of an earlier
	   parse, whose argv may be gone (tests/fuzz/corpus/opts/second-parse) */
	optind = 0;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		if (c == '?') {
			if (optopt)
				return opts_usage_error("unknown option '-%c'", optopt);
			return opts_usage_error("unknown option '%s'", argv[optind - 1]);
		}
		if (c == ':')
			return opts_usage_error("option '%s' needs a value", argv[optind - 1]);
		if (c == OPT_HELP) {
			opts_print_help(stdout, doc, table);
			exit(EXIT_OK);
		}
		if (c == OPT_VERSION) {
			printf("%s (pyebpf) %s\n", doc->name, PYEBPF_VERSION);
			exit(EXIT_OK);
		}
		r = handle_common(common, c, optarg);
		if (r < 0)
			return -1;
		if (r == 0 && (!handler || handler(c, optarg, ctx)))
			return -1;
	}
	/* as with BCC's profile: `tool -p 42 10` traces for 10 seconds */
	if (!doc->operands && optind < argc) {
		if (optind + 1 < argc)
			return opts_usage_error("unexpected argument '%s'", argv[optind + 1]);
		if (common->duration_s)
			return opts_usage_error("a duration given twice: -d and '%s'", argv[optind]);
		if (opts_parse_seconds("duration", argv[optind], &common->duration_s))
			return -1;
		optind++;
	}
	return optind;
}
