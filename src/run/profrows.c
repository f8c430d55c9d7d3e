#include "profrows.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbtable.h"
#include "fnv.h"
#include "jsonfmt.h"
#include "record.h"

#define DAY_US INT64_C(86400000000)

static const struct field stacks_fields[] = {
	FIELD_METRIC,
	{ .name = "time", .type = FIELD_TIME, .meaning = "when this run first saw the stack on this UTC day" },
	{ .name = "stack_id", .type = FIELD_INT, .meaning = "the stack's id: FNV-1a 64 of its text, top bit cleared" },
	{ .name = "stack", .type = FIELD_STR, .meaning = "the frames, root first, ';' between them" },
	{ .name = "depth", .type = FIELD_INT, .meaning = "frames in stack, without the markers" },
	{ .name = "leaf_func", .type = FIELD_STR, .meaning = "the innermost frame's function" },
	{ .name = "leaf_file", .type = FIELD_STR, .meaning = "the innermost frame's file; null when unknown" },
	{ .name = "leaf_line", .type = FIELD_INT, .meaning = "the innermost frame's line; null when unknown" },
	FIELD_ENV,
	FIELD_END,
};
const struct schema profrows_stacks_schema = { "stacks", SCHEMA_EVENT, stacks_fields };

static const struct field py_stack_profile_fields[] = {
	FIELD_METRIC,
	{ .name = "time", .type = FIELD_TIME, .meaning = "the window's start (a multiple of --profile-window)" },
	{ .name = "window_end", .type = FIELD_TIME, .meaning = "the window's end" },
	FIELD_PID(0),
	FIELD_TID(0),
	FIELD_CONTAINER_PID,
	FIELD_THREAD_NAME(0),
	{ .name = "task", .type = FIELD_STR, .meaning = "the asyncio task running on the thread, empty when none" },
	{ .name = "stack_id", .type = FIELD_INT, .meaning = "the stack (ebpf_stacks.stack_id)" },
	{ .name = "samples", .type = FIELD_INT, .meaning = "samples of this stack on this thread in the window" },
	FIELD_ENV,
	FIELD_END,
};
static const struct schema py_stack_profile_schema = { "py_stack_profile", SCHEMA_EVENT, py_stack_profile_fields };

/* The profile of records that weigh their stack by a time: the events' count and their time. */
#define WEIGHTED_PROFILE_FIELDS(thread)                                                                   \
	FIELD_METRIC,                                                                                     \
	{ .name = "time", .type = FIELD_TIME, .meaning = "the window's start (a multiple of --profile-window)" }, \
	{ .name = "window_end", .type = FIELD_TIME, .meaning = "the window's end" },                      \
	FIELD_PID(0),                                                                                     \
	{ .name = "tid", .type = FIELD_INT, .meaning = thread "'s host thread id" },                      \
	FIELD_CONTAINER_PID,                                                                              \
	{ .name = "thread_name", .type = FIELD_STR, .meaning = thread "'s Python thread name, else its comm" }, \
	{ .name = "stack_id", .type = FIELD_INT, .meaning = "the stack (ebpf_stacks.stack_id)" },         \
	{ .name = "samples", .type = FIELD_INT, .meaning = "records of this stack and thread in the window" }, \
	{ .name = "weight_us", .type = FIELD_INT, .unit = "us", .meaning = "their time in all" },         \
	FIELD_ENV, FIELD_END

static const struct field off_cpu_profile_fields[] = { WEIGHTED_PROFILE_FIELDS("the sleeping thread") };
static const struct field gil_holder_profile_fields[] = { WEIGHTED_PROFILE_FIELDS("the GIL holder") };
static const struct field loop_stall_profile_fields[] = { WEIGHTED_PROFILE_FIELDS("the loop thread") };
static const struct schema off_cpu_profile_schema = { "off_cpu_profile", SCHEMA_EVENT, off_cpu_profile_fields };
static const struct schema gil_holder_profile_schema = { "gil_holder_profile", SCHEMA_EVENT, gil_holder_profile_fields };
static const struct schema loop_stall_profile_schema = { "loop_stall_profile", SCHEMA_EVENT, loop_stall_profile_fields };

/* Where a row's key fields come from in the record: pid, tid, container_pid, thread_name, task. */
#define NKEYS 5
static const char *const key_fields[NKEYS] = { "pid", "tid", "container_pid", "thread_name", "task" };

/*
 * A stack-sampling record and its aggregated schema: the stack field, the weight (a
 * time in ms; NULL: samples only) and the record's fields of the row's keys.
 */
static const struct kind {
	const char *metric;
	const struct schema *profile;
	const char *stack, *weight_ms;
	const char *keys[NKEYS];
} kinds[] = {
	{ "py_stack", &py_stack_profile_schema, "stack", NULL,
	  { "pid", "tid", "container_pid", "thread_name", "task" } },
	/* pyoffcpu: the Python stack a sleep began in, weighed by its time off the CPU */
	{ "off_cpu", &off_cpu_profile_schema, "py_stack", "off_cpu_ms",
	  { "pid", "tid", "container_pid", "thread_name", NULL } },
	/* pygil: the holder's stack, weighed by the wait it caused */
	{ "gil_wait", &gil_holder_profile_schema, "holder_py_stack", "duration_ms",
	  { "pid", "holder_tid", "container_pid", "holder_thread_name", NULL } },
	/* pyloop: the stack that held the loop, weighed by the stall */
	{ "loop_stall", &loop_stall_profile_schema, "py_stack", "duration_ms",
	  { "pid", "tid", "container_pid", "thread_name", NULL } },
};

static const struct kind *kind_of(const struct schema *sc)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(sc->metric, kinds[i].metric))
			return &kinds[i];
	return NULL;
}

bool profrows_is_stack_field(const struct schema *sc, const struct field *f)
{
	size_t n = strlen(f->name);

	if (f->type != FIELD_STR || profrows_is_profile(sc))
		return false;
	return !strcmp(f->name, "py_stack") || (n > 9 && !strcmp(f->name + n - 9, "_py_stack"));
}

const struct schema *profrows_profile_of(const struct schema *sc)
{
	const struct kind *k = kind_of(sc);

	return k ? k->profile : NULL;
}

bool profrows_is_sample(const struct schema *sc)
{
	const struct kind *k = kind_of(sc);

	return k && !k->weight_ms;
}

bool profrows_wanted(const struct schema *sc)
{
	if (kind_of(sc))
		return true;
	for (const struct field *f = sc->fields; f->name; f++)
		if (profrows_is_stack_field(sc, f))
			return true;
	return false;
}

bool profrows_is_profile(const struct schema *sc)
{
	if (sc == &profrows_stacks_schema)
		return true;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (sc == kinds[i].profile)
			return true;
	return false;
}

int64_t profrows_stack_id(const char *stack)
{
	return (int64_t)(fnv1a64(stack, strlen(stack)) & INT64_MAX);
}

struct profrows {
	int64_t window_us;
	json_t *rows;       /* key → the row being counted */
	int64_t oldest_end; /* the earliest window end among rows (INT64_MAX: none) */
	json_t *seen;       /* "day:stack_id" of the dictionary rows already made */
	json_t *new_stacks; /* dictionary rows not handed out yet */
	unsigned long samples, emitted, stacks;
};

struct profrows *profrows_new(double window_s)
{
	struct profrows *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->window_us = (int64_t)(window_s * 1e6);
	if (p->window_us < 1000)
		p->window_us = 1000;
	p->rows = json_object();
	p->seen = json_object();
	p->new_stacks = json_array();
	p->oldest_end = INT64_MAX;
	if (!p->rows || !p->seen || !p->new_stacks) {
		profrows_free(p);
		return NULL;
	}
	return p;
}

static json_t *or_null(json_t *v)
{
	return v ? json_incref(v) : json_null();
}

/*
 * The innermost frame of a folded stack, "func (file:line)" (the last part; markers
 * such as "[truncated]" are no frames): func, file and line (0 when none), and the
 * number of frames.
 */
static int parse_leaf(const char *stack, char *func, size_t flen, char *file, size_t filelen, long *line)
{
	const char *part = stack, *open, *colon;
	int depth = 0;

	func[0] = file[0] = 0;
	*line = 0;
	for (const char *p = stack;; p++) {
		if (*p == ';' || !*p) {
			if (p > part && *part != '[') {
				depth++;
				snprintf(func, flen, "%.*s", (int)(p - part), part);
			}
			if (!*p)
				break;
			part = p + 1;
		}
	}
	/* "qualname (file:line)": the file and line are inside the last parentheses */
	if ((open = strrchr(func, '(')) && open > func && open[-1] == ' ' && func[strlen(func) - 1] == ')') {
		snprintf(file, filelen, "%.*s", (int)(strlen(open + 1) - 1), open + 1);
		if ((colon = strrchr(file, ':'))) {
			*line = strtol(colon + 1, NULL, 10);
			file[colon - file] = 0;
		}
		func[open - 1 - func] = 0;
	}
	return depth;
}

/*
 * The dictionary row of stack, from the sample's own leaf fields where it has them
 * (pystack's samples: field "stack" with "stack_depth", "leaf_*"); else from its text.
 */
static json_t *stack_row(json_t *sample, const char *field, const char *stack, int64_t id, const char *time)
{
	json_t *o = json_object(), *v;
	char func[512], file[512];
	long line;
	int depth = parse_leaf(stack, func, sizeof(func), file, sizeof(file), &line);

	json_set_str(o, "metric", profrows_stacks_schema.metric);
	json_set_str(o, "time", time);
	json_set_int(o, "stack_id", id);
	json_set_str(o, "stack", stack);
	bool own = !strcmp(field, "stack");

	v = own ? json_object_get(sample, "stack_depth") : NULL;
	json_set_int(o, "depth", json_is_integer(v) ? json_integer_value(v) : depth);
	if (own && (v = json_object_get(sample, "leaf_func")) && json_is_string(v)) {
		json_object_set(o, "leaf_func", v);
		json_object_set_new(o, "leaf_file", or_null(json_object_get(sample, "leaf_file")));
		json_object_set_new(o, "leaf_line", or_null(json_object_get(sample, "leaf_line")));
	} else {
		json_set_str(o, "leaf_func", func);
		if (file[0])
			json_set_str(o, "leaf_file", file);
		else
			json_object_set_new(o, "leaf_file", json_null());
		record_set_int_or_null(o, "leaf_line", line, line > 0);
	}
	if ((v = json_object_get(sample, "env")))
		json_object_set(o, "env", v);
	return o;
}

/* The dictionary row of stack (from obj's field), unless made already today. */
static void note(struct profrows *p, json_t *obj, const char *field, const char *stack, int64_t t_us, const char *time)
{
	int64_t id = profrows_stack_id(stack);
	char seen[48];

	snprintf(seen, sizeof(seen), "%" PRId64 ":%" PRId64, (int64_t)(t_us / DAY_US), id);
	if (!json_object_get(p->seen, seen)) {
		json_object_set_new(p->seen, seen, json_true());
		json_array_append_new(p->new_stacks, stack_row(obj, field, stack, id, time));
	}
}

/* The record's time (*iso): its own, else now (then *iso is buf). */
static int64_t time_of(const char **iso, char *buf, size_t len)
{
	int64_t t_us = dbtable_parse_time_us(*iso);

	if (t_us >= 0)
		return t_us;
	t_us = dbtable_now_us();
	dbtable_format_time_us(t_us, buf, len);
	*iso = buf;
	return t_us;
}

void profrows_add(struct profrows *p, const struct schema *sc, json_t *obj)
{
	const struct kind *k = kind_of(sc);
	const char *time = json_string_value(json_object_get(obj, "time"));
	const char *stack;
	char key[1024], iso[40], now[40];
	int64_t t_us = time_of(&time, now, sizeof(now)), start, id, weight_us = 0;
	size_t n;
	json_t *row, *v;

	/* the stack columns of events: their dictionary rows */
	for (const struct field *f = sc->fields; f->name; f++)
		if (profrows_is_stack_field(sc, f) && (stack = json_string_value(json_object_get(obj, f->name))))
			note(p, obj, f->name, stack, t_us, time);
	if (!k || !(stack = json_string_value(json_object_get(obj, k->stack))))
		return;
	note(p, obj, k->stack, stack, t_us, time);
	if (k->weight_ms) {
		v = json_object_get(obj, k->weight_ms);
		if (!json_is_number(v))
			return;
		weight_us = (int64_t)(json_number_value(v) * 1000 + 0.5);
	}
	p->samples++;
	id = profrows_stack_id(stack);
	start = t_us - t_us % p->window_us;
	n = (size_t)snprintf(key, sizeof(key), "%s:%" PRId64 ":%" PRId64, sc->metric, start, id);
	for (size_t i = 0; i < NKEYS && n < sizeof(key); i++) {
		v = k->keys[i] ? json_object_get(obj, k->keys[i]) : NULL;
		if (json_is_string(v))
			n += (size_t)snprintf(key + n, sizeof(key) - n, "|s%s", json_string_value(v));
		else if (json_is_integer(v))
			n += (size_t)snprintf(key + n, sizeof(key) - n, "|i%" JSON_INTEGER_FORMAT, json_integer_value(v));
		else
			n += (size_t)snprintf(key + n, sizeof(key) - n, "|n");
	}
	if ((row = json_object_get(p->rows, key))) {
		json_object_set_new(row, "samples", json_integer(json_integer_value(json_object_get(row, "samples")) + 1));
		if (k->weight_ms)
			json_object_set_new(row, "weight_us",
					    json_integer(json_integer_value(json_object_get(row, "weight_us")) + weight_us));
		return;
	}
	row = json_object();
	json_set_str(row, "metric", k->profile->metric);
	dbtable_format_time_us(start, iso, sizeof(iso));
	json_set_str(row, "time", iso);
	dbtable_format_time_us(start + p->window_us, iso, sizeof(iso));
	json_set_str(row, "window_end", iso);
	for (size_t i = 0; i < NKEYS; i++)
		if (k->keys[i] && (v = json_object_get(obj, k->keys[i])))
			json_object_set(row, key_fields[i], v);
	json_set_int(row, "stack_id", id);
	json_set_int(row, "samples", 1);
	if (k->weight_ms)
		json_set_int(row, "weight_us", weight_us);
	if ((v = json_object_get(obj, "env")))
		json_object_set(row, "env", v);
	json_object_set_new(p->rows, key, row);
	if (start + p->window_us < p->oldest_end)
		p->oldest_end = start + p->window_us;
}

void profrows_emit_stacks(struct profrows *p, profrows_out out, void *ctx)
{
	size_t i;
	json_t *v;

	json_array_foreach(p->new_stacks, i, v)
	{
		out(ctx, &profrows_stacks_schema, v);
		p->stacks++;
	}
	json_array_clear(p->new_stacks);
}

void profrows_emit(struct profrows *p, int64_t now_us, int64_t lag_us, bool all, profrows_out out, void *ctx)
{
	json_t *v, *tmp;
	const char *key;
	int64_t oldest = INT64_MAX;

	profrows_emit_stacks(p, out, ctx);
	/* no row yet: oldest_end is INT64_MAX, so the lag comes off now_us, not onto it */
	if (!all && now_us - lag_us < p->oldest_end)
		return;
	json_object_foreach_safe(p->rows, tmp, key, v)
	{
		int64_t end = dbtable_parse_time_us(json_string_value(json_object_get(v, "window_end")));
		const struct schema *profile = NULL;
		const char *metric = json_string_value(json_object_get(v, "metric"));

		if (!all && now_us < end + lag_us) {
			if (end < oldest)
				oldest = end;
			continue;
		}
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
			if (!strcmp(metric, kinds[k].profile->metric))
				profile = kinds[k].profile;
		out(ctx, profile, v);
		p->emitted++;
		json_object_del(p->rows, key);
	}
	p->oldest_end = oldest;
}

void profrows_counts(const struct profrows *p, unsigned long *samples, unsigned long *rows, unsigned long *stacks)
{
	*samples = p->samples;
	*rows = p->emitted;
	*stacks = p->stacks;
}

void profrows_free(struct profrows *p)
{
	if (!p)
		return;
	json_decref(p->rows);
	json_decref(p->seen);
	json_decref(p->new_stacks);
	free(p);
}
