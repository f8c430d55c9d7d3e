#include "summary.h"

#include <string.h>

#include "jsonfmt.h"

json_t *summary_begin(const struct tracker *t, const struct schema *sc, const struct counter_name *counters)
{
	json_t *sum = json_object();

	json_set_str(sum, "metric", sc->metric);
	if (counters)
		pyebpf_bpf_set_counters(sum, t->prog, counters);
	return sum;
}

static bool has_field(const struct schema *sc, const char *name)
{
	for (const struct field *f = sc->fields; f->name; f++)
		if (!strcmp(f->name, name))
			return true;
	return false;
}

/* sum's keys in the order of sc's fields; keys sc lacks last, where the sink names them. */
static json_t *in_schema_order(const struct schema *sc, json_t *sum)
{
	json_t *out = json_object(), *v;
	const char *key;

	for (const struct field *f = sc->fields; f->name; f++)
		if ((v = json_object_get(sum, f->name)))
			json_object_set(out, f->name, v);
	json_object_foreach(sum, key, v)
		if (!json_object_get(out, key))
			json_object_set(out, key, v);
	json_decref(sum);
	return out;
}

void summary_end(struct tracker *t, const struct schema *sc, json_t *sum, unsigned long long processes)
{
	if (has_field(sc, "lost") || has_field(sc, "missed"))
		pyebpf_bpf_set_losses(sum, t->prog);
	if (has_field(sc, "processes"))
		json_set_int(sum, "processes", (json_int_t)processes);
	if (has_field(sc, "tool_cpu_ms"))
		json_set_real(sum, "tool_cpu_ms", (double)(time_self_cpu_us() - t->cpu_start_us) / 1000.0);
	sink_summary(t->sink, sc, in_schema_order(sc, sum));
}
