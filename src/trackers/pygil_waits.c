/* pygil's per-thread wait totals, read back from the threads' wait states (pygil_waits.h). */
#include "pygil_waits.h"

#include <bcc/libbpf.h>
#include <errno.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "procinfo.h"
#include "pygil.h"

/* States read at most: every slot, and the hash waiting (as many as it holds). */
enum { MAX_STATES = PYGIL_WAIT_SLOTS + 8192 };

/* A thread's totals as a sweep saw them. */
struct wait_totals {
	uint64_t id, wait_ns, waits;
	bool ended; /* the thread had ended when that sweep looked */
};

int pygil_waits_init(struct pygil_waits *w)
{
	memset(w, 0, sizeof(*w));
	w->states = calloc(MAX_STATES, sizeof(*w->states));
	w->where = calloc(MAX_STATES, sizeof(*w->where));
	w->slot_keys = calloc(PYGIL_WAIT_SLOTS, sizeof(*w->slot_keys));
	w->seen = calloc(MAX_STATES, sizeof(*w->seen));
	w->next_seen = calloc(MAX_STATES, sizeof(*w->next_seen));
	if (w->states && w->where && w->slot_keys && w->seen && w->next_seen)
		return 0;
	pygil_waits_free(w);
	return -1;
}

void pygil_waits_free(struct pygil_waits *w)
{
	free(w->states);
	free(w->where);
	free(w->slot_keys);
	free(w->seen);
	free(w->next_seen);
	memset(w, 0, sizeof(*w));
}

/* Every state into w->states (the slot of each in w->where, -1: the hash). How many. */
static size_t read_states(struct pygil_waits *w, int slots, int hash)
{
	__u32 at = 0, next, count;
	__u64 key, prev;
	size_t n = 0;
	bool more = true;

	/* the array in batches (the last ends with ENOENT), then only the slots in use kept */
	for (bool first = true; more && n + PYGIL_WAIT_SLOTS <= MAX_STATES; first = false, at = next) {
		count = PYGIL_WAIT_SLOTS;
		more = !bpf_lookup_batch(slots, first ? NULL : &at, &next, w->slot_keys, &w->states[n], &count);
		if (!more && errno != ENOENT) {
			log_debug("wait_slots: %s", strerror(errno));
			break;
		}
		for (__u32 i = 0, base = (__u32)n; i < count && i < PYGIL_WAIT_SLOTS; i++)
			if (w->states[base + i].id) {
				w->states[n] = w->states[base + i];
				w->where[n++] = (int)w->slot_keys[i];
			}
	}
	for (int i = 0; n < MAX_STATES && !bpf_get_next_key(hash, i ? &prev : NULL, &key); i++, prev = key)
		if (!bpf_lookup_elem(hash, &key, &w->states[n]) && w->states[n].id == key)
			w->where[n++] = -1;
	return n;
}

static int by_id(const void *a, const void *b)
{
	const struct wait_totals *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * A state is freed when it did not grow since a sweep that found its thread ended: that
 * sweep looked after the thread's last wait, and this one read the state after that, so
 * all it holds is counted. (Whether a thread has ended is looked at after the states
 * are read, and it may have waited and ended in between.)
 */
void pygil_waits_sweep(struct pygil_waits *w, struct bpfprog *p, pygil_waits_fn fn, void *ctx)
{
	int slots = bpfprog_table_fd(p, "wait_slots"), hash = bpfprog_table_fd(p, "waiting");
	size_t n = slots >= 0 && hash >= 0 ? read_states(w, slots, hash) : 0, kept = 0;
	struct wait_totals *swap;

	for (size_t i = 0; i < n; i++) {
		const struct pygil_wait_state *st = &w->states[i];
		struct wait_totals now = { st->id, st->wait_ns, st->waits, false }, *was;
		pid_t pid = (pid_t)(st->id >> 32), tid = (pid_t)(__u32)st->id;
		struct pygil_wait_state none = { 0 };
		__u32 slot = (__u32)w->where[i];

		was = w->nseen ? bsearch(&now, w->seen, w->nseen, sizeof(*w->seen), by_id) : NULL;
		/* a state made anew since (evicted from the hash) counts from 0 */
		if (was && was->waits <= now.waits && was->wait_ns <= now.wait_ns) {
			now.waits -= was->waits;
			now.wait_ns -= was->wait_ns;
		}
		if (now.waits) {
			fn(ctx, pid, tid, now.wait_ns, now.waits);
		} else if (was && was->ended) {
			if (w->where[i] >= 0)
				bpf_update_elem(slots, &slot, &none, BPF_ANY);
			else
				bpf_delete_elem(hash, &now.id);
			continue;
		}
		w->next_seen[kept++] = (struct wait_totals){ st->id, st->wait_ns, st->waits,
							     !now.waits && !procinfo_thread_exists(pid, tid) };
	}
	qsort(w->next_seen, kept, sizeof(*w->next_seen), by_id);
	swap = w->seen;
	w->seen = w->next_seen;
	w->next_seen = swap;
	w->nseen = kept;
}
