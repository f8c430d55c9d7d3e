#include "record.h"

#include <sys/socket.h>

#include "inetfmt.h"
#include "jsonfmt.h"

void record_set_int_or_null(json_t *o, const char *key, json_int_t v, bool known)
{
	json_object_set_new_nocheck(o, key, known ? json_integer(v) : json_null());
}

void record_set_ids(json_t *o, const struct task_head *h)
{
	bool known = h->pid != 0;

	record_set_int_or_null(o, "pid", h->pid, known);
	record_set_int_or_null(o, "tid", h->tid, known);
	record_set_int_or_null(o, "container_pid", h->nspid ? h->nspid : h->pid, known);
	record_set_int_or_null(o, "container_tid", h->nstid ? h->nstid : h->tid, known);
}

void record_set_task(json_t *o, const struct task_head *h)
{
	record_set_ids(o, h);
	if (h->pid != 0)
		json_set_strn(o, "comm", h->comm, sizeof(h->comm));
	else
		json_object_set_new(o, "comm", json_null());
}

void record_set_family(json_t *o, int family)
{
	json_object_set_new_nocheck(o, "family", json_string_nocheck(family == AF_INET6 ? "ipv6" : "ipv4"));
}

void record_set_endpoints(json_t *o, int family, const __u8 *src, unsigned sport, const __u8 *dst,
			  unsigned dport)
{
	char ip[INET6_ADDRSTRLEN];

	/* inet_format writes ASCII: no UTF-8 repair (a storm prints many of these) */
	inet_format(family, src, ip, sizeof(ip));
	json_object_set_new_nocheck(o, "src_ip", json_string_nocheck(ip));
	json_object_set_new_nocheck(o, "src_port", json_integer(sport));
	inet_format(family, dst, ip, sizeof(ip));
	json_object_set_new_nocheck(o, "dst_ip", json_string_nocheck(ip));
	json_object_set_new_nocheck(o, "dst_port", json_integer(dport));
}

void record_set_time(json_t *o, __u64 ts_ns)
{
	char when[40];

	time_format_mono_ns(ts_ns, when, sizeof(when));
	json_set_str(o, "time", when);
}

void record_set_targets(json_t *o, unsigned long long skipped, unsigned long long exited)
{
	json_set_int(o, "skipped_targets", (json_int_t)skipped);
	json_set_int(o, "exited_targets", (json_int_t)exited);
}
