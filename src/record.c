#include "record.h"

#include "out.h"

static void int_or_null(json_t *o, const char *key, json_int_t v, int known)
{
	json_object_set_new(o, key, known ? json_integer(v) : json_null());
}

void record_set_ids(json_t *o, const struct task_head *h)
{
	int known = h->pid != 0;

	int_or_null(o, "pid", h->pid, known);
	int_or_null(o, "tid", h->tid, known);
	int_or_null(o, "container_pid", h->nspid ? h->nspid : h->pid, known);
	int_or_null(o, "container_tid", h->nstid ? h->nstid : h->tid, known);
}

void record_set_task(json_t *o, const struct task_head *h)
{
	record_set_ids(o, h);
	if (h->pid != 0)
		json_set_strn(o, "comm", h->comm, sizeof(h->comm));
	else
		json_object_set_new(o, "comm", json_null());
}

void record_set_time(json_t *o, __u64 ts_ns)
{
	char when[40];

	time_format_mono_ns(ts_ns, when, sizeof(when));
	json_set_str(o, "time", when);
}

void record_set_losses(json_t *o, struct bpfprog *p)
{
	json_set_int(o, "lost", (json_int_t)bpfprog_lost(p));
	json_set_int(o, "missed", (json_int_t)bpfprog_missed(p));
}

void record_set_counters(json_t *o, struct bpfprog *p, const struct counter_name *names)
{
	for (; names->name; names++)
		json_set_int(o, names->name, (json_int_t)bpfprog_table_sum_u64(p, "counters", names->id));
}
