/*
 * The C half of src/bpf/bpfcheck.sh, make's check of the BPF text: the parts of what
 * libbcc compiles against that pyebpf's own code provides, taken from that code so
 * the check cannot drift from the tools. Not part of libpyebpf.a (it has a main).
 *   bpfcheck_helper builtin DIR        writes the built-in kernel header set into DIR
 *   bpfcheck_helper kheaders           the header tree a tool would use here
 *                                      (kheaders_find): its folder on line 1, how it
 *                                      was found on line 2; nothing when that is the
 *                                      built-in set. A merged tree is made under
 *                                      $TMPDIR and left there for the caller.
 *   bpfcheck_helper tpstructs DIR CAT:NAME...
 *                                      writes DIR/CAT:NAME, the args struct libbcc
 *                                      declares for that tracepoint; empty (libbcc
 *                                      declares none) when it has no format file
 * Exit 0, 1 on failure, 2 on bad usage.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kbtf.h"
#include "kheaders.h"
#include "log.h"
#include "tpformat.h"
#include "tracefs.h"

/* libbcc sizes arrays like comm[TASK_COMM_LEN] from BTF's enums */
static int btf_dim(void *ctx, const char *name, long long *value)
{
	struct kbtf **b = ctx;

	if (!*b && !(*b = kbtf_open()))
		return -1;
	return kbtf_enum_value(*b, name, value);
}

static int tpstructs(const char *dir, char **tps, int n)
{
	struct kbtf *b = NULL;
	int r = 0;

	if (tracefs_ensure())
		return 1; /* unreadable is not absent: say so rather than declare nothing */
	for (int i = 0; i < n && !r; i++) {
		char path[PATH_MAX], category[128], *name = strchr(tps[i], ':'), *s;
		FILE *f;

		if (!name || name - tps[i] >= (long)sizeof(category)) {
			fprintf(stderr, "bpfcheck_helper: not CATEGORY:NAME: %s\n", tps[i]);
			r = 2;
			break;
		}
		snprintf(category, sizeof(category), "%.*s", (int)(name - tps[i]), tps[i]);
		snprintf(path, sizeof(path), "%s/%s", dir, tps[i]);
		s = tpformat_struct(category, name + 1, btf_dim, &b);
		f = fopen(path, "w");
		if (f) {
			bool bad = s && fputs(s, f) < 0;

			if (fclose(f) || bad)
				f = NULL;
		}
		if (!f) {
			perror(path);
			r = 1;
		}
		free(s);
	}
	kbtf_close(b);
	return r;
}

static int kheaders(void)
{
	struct kheaders kh;

	if (kheaders_find(NULL, &kh))
		return 1;
	if (kh.builtin)
		kheaders_release(&kh);
	else
		printf("%s\n%s\n", kh.dir, kh.what);
	return 0;
}

int main(int argc, char **argv)
{
	log_progname = "bpfcheck_helper";
	if (argc == 3 && !strcmp(argv[1], "builtin"))
		return kheaders_write_builtin(argv[2]) ? (perror(argv[2]), 1) : 0;
	if (argc == 2 && !strcmp(argv[1], "kheaders"))
		return kheaders();
	if (argc >= 3 && !strcmp(argv[1], "tpstructs"))
		return tpstructs(argv[2], argv + 3, argc - 3);
	fprintf(stderr, "usage: bpfcheck_helper builtin DIR | kheaders | "
			"tpstructs DIR CATEGORY:NAME...\n");
	return 2;
}
