/*
 * kallsyms_cost: what naming kernel addresses costs, our table (kallsyms.h) against
 * libbcc's kernel symcache, for bench/kallsyms.sh.
 *
 *   kallsyms_cost ROUNDS
 *
 * Each round, each table alternately, in a fresh child process: the time and the VmRSS
 * growth from before the table to after its first name (libbcc reads kallsyms at the
 * first resolve). Prints one line per measurement: "NAME ms kB symbols".
 */
#include <bcc/bcc_syms.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jsonfmt.h"
#include "kallsyms.h"

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long kb = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kb;
}

/* A kernel text address to name: _stext's, from the table itself. */
static void measure(int libbcc)
{
	long before = rss_kb();
	uint64_t t0 = time_mono_ns();
	size_t n = 0;
	const char *name = NULL;

	if (libbcc) {
		struct bcc_symbol sym;
		void *c = bcc_symcache_new(-1, NULL);

		if (c && !bcc_symcache_resolve_no_demangle(c, 0xffffffff81000000ull, &sym))
			name = sym.name, n = 1;
	} else {
		struct kallsyms *k = kallsyms_load(NULL);

		if (k && (n = kallsyms_count(k)))
			name = kallsyms_name(k, 0xffffffff81000000ull, NULL);
	}
	printf("%s %.1f %ld %zu\n", libbcc ? "libbcc" : "kallsyms", (time_mono_ns() - t0) / 1e6, rss_kb() - before,
	       name ? n : 0);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5;

	for (int r = 0; r < rounds; r++)
		for (int libbcc = r % 2, i = 0; i < 2; i++, libbcc ^= 1) {
			pid_t pid;

			fflush(stdout);
			if ((pid = fork()) == 0) {
				measure(libbcc);
				fflush(stdout);
				_exit(0);
			}
			if (pid < 0 || waitpid(pid, NULL, 0) != pid)
				return 1;
		}
	return 0;
}
