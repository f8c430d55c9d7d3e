#include "pidwatch.h"

#include <string.h>

#include "log.h"
#include "procinfo.h"

void pidwatch_init(struct pidwatch *w, const pid_t *pids, int npids)
{
	memset(w, 0, sizeof(*w));
	w->npids = w->nalive = npids < MAX_PIDS ? npids : MAX_PIDS;
	memcpy(w->pids, pids, (size_t)w->npids * sizeof(*pids));
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
		}
	}
	return w->nalive == 0;
}
