#include "pidwatch.h"

#include <bcc/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "procinfo.h"
#include "pytargets.h"

int pidwatch_init(struct pidwatch *w, const pid_t *pids, int npids)
{
	memset(w, 0, sizeof(*w));
	for (int i = 0; i < npids && i < MAX_PIDS; i++) {
		char why[64];

		if (procinfo_exists(pids[i])) {
			w->pids[w->npids++] = pids[i];
			continue;
		}
		snprintf(why, sizeof(why), "no process with pid %d", pids[i]);
		pytargets_say_skipped(pids[i], why);
		w->skipped++;
	}
	w->nalive = w->npids;
	return w->npids;
}

int pidwatch_follow_children(const struct pidwatch *w, struct bpfprog *p, const char *map, unsigned char value)
{
	enum { MAX = 4096 };
	int fd = bpfprog_table_fd(p, map), n;
	struct pychild *kids = malloc(MAX * sizeof(*kids));

	if (fd < 0 || !kids) {
		free(kids);
		return -1;
	}
	n = pytargets_descendants(w->pids, w->npids, kids, MAX);
	for (int i = 0; i < n; i++) {
		__u32 pid = (__u32)kids[i].pid;
		log_debug("following child %d of %d", kids[i].pid, kids[i].ppid);
		if (bpf_update_elem(fd, &pid, &value, 0))
			log_warn("cannot follow child %d of %d: %s", kids[i].pid, kids[i].ppid, strerror(errno));
	}
	free(kids);
	return 0;
}

bool pidwatch_all_gone(struct pidwatch *w, uint64_t now_ns)
{
	if (!w->npids || now_ns < w->next_check_ns)
		return w->npids && !w->nalive;
	w->next_check_ns = now_ns + 200000000ull;
	for (int i = 0; i < w->npids; i++) {
		if (w->pids[i] && !procinfo_alive(w->pids[i])) {
			log_warn("target pid %d exited", w->pids[i]);
			w->pids[i] = 0;
			w->nalive--;
			w->exits++;
		}
	}
	return w->nalive == 0;
}
