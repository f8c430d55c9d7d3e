#include "pidwatch.h"

#include <stdio.h>
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
