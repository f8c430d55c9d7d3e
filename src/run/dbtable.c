#include "dbtable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "profrows.h"

/* Where the original monitor's table name is not ebpf_<metric>. */
static const struct {
	const char *metric, *table;
} renamed[] = {
	{ "py_stack", "ebpf_py_stacks" },
	{ "host_net", "ebpf_host_net_health" },
};

bool dbtable_wanted(const struct schema *sc)
{
	return sc->kind == SCHEMA_EVENT;
}

static int add(struct db_table *t, const char *name, const char *suffix, enum db_type type,
	       const char *field, bool key)
{
	struct db_column *c;

	if (t->ncols == DB_MAX_COLUMNS)
		return -1;
	c = &t->cols[t->ncols++];
	snprintf(c->name, sizeof(c->name), "%s%s", name, suffix);
	c->type = type;
	c->field = field;
	c->key = key;
	return 0;
}

static enum db_type db_type_of(enum field_type t)
{
	switch (t) {
	case FIELD_INT:
		return DB_INT;
	case FIELD_REAL:
		return DB_REAL;
	case FIELD_BOOL:
		return DB_BOOL;
	case FIELD_TIME:
		return DB_DATETIME;
	default:
		return DB_STRING; /* text, and arrays and objects as their JSON text */
	}
}

int dbtable_init(struct db_table *t, const struct schema *sc)
{
	memset(t, 0, sizeof(*t));
	t->schema = sc;
	snprintf(t->name, sizeof(t->name), "ebpf_%s", sc->metric);
	for (size_t i = 0; i < sizeof(renamed) / sizeof(renamed[0]); i++)
		if (!strcmp(renamed[i].metric, sc->metric))
			snprintf(t->name, sizeof(t->name), "%s", renamed[i].table);
	t->order_by = sc == &profrows_stacks_schema ? "env, host, stack_id, time"
		      : profrows_is_profile(sc)      ? "env, host, time, stack_id"
						     : "env, host, time";
	if (add(t, "env", "", DB_STRING, "env", true) || add(t, "host", "", DB_STRING, NULL, true) ||
	    add(t, "time", "", DB_DATETIME, "time", true) || add(t, "time", "_us", DB_MICROS, "time", true))
		return -1;
	for (const struct field *f = sc->fields; f->name; f++) {
		if (!strcmp(f->name, "metric") || !strcmp(f->name, "env") || !strcmp(f->name, "time"))
			continue;
		bool id = !strcmp(f->name, "stack_id");
		if (profrows_is_stack_field(sc, f)) {
			if (add(t, f->name, "_id", DB_ID, f->name, false))
				return -1;
			t->cols[t->ncols - 1].stack_id = true;
			continue;
		}
		bool count = profrows_is_profile(sc) && !strcmp(f->name, "samples");
		/* a profile row has every field (a thread without a task: ""), so none is null */
		bool key = profrows_is_profile(sc) && (sc != &profrows_stacks_schema || id);
		if (add(t, f->name, "", id ? DB_ID : count ? DB_COUNT : db_type_of(f->type), f->name, key))
			return -1;
		if (f->type == FIELD_TIME && add(t, f->name, "_us", DB_MICROS, f->name, key))
			return -1;
	}
	return 0;
}

int64_t dbtable_parse_time_us(const char *iso)
{
	struct tm tm = { 0 };
	char frac[8] = "";
	int n = 0, len = 0;
	int64_t us = 0;

	if (!iso || sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
		return -1;
	if (iso[n] == '.' && sscanf(iso + n + 1, "%6[0-9]%n", frac, &len) == 1) {
		for (int i = 0; i < 6; i++)
			us = us * 10 + (i < len ? frac[i] - '0' : 0);
		n += 1 + len;
	}
	if (strcmp(iso + n, "Z"))
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000000 + us;
}

int64_t dbtable_now_us(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

void dbtable_format_time_us(int64_t us, char *buf, size_t len)
{
	time_t sec = (time_t)(us / 1000000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)(us % 1000000));
}

static json_t *value(const struct db_column *c, json_t *v)
{
	switch (c->type) {
	case DB_STRING:
		if (json_is_string(v))
			return json_incref(v);
		if (json_is_array(v) || json_is_object(v) || json_is_number(v) || json_is_boolean(v)) {
			char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY |
							JSON_REAL_PRECISION(15));
			json_t *r = s ? json_string(s) : json_null();
			free(s);
			return r;
		}
		return json_null();
	case DB_INT:
	case DB_ID:
	case DB_COUNT:
		return json_is_integer(v) ? json_incref(v)
		       : json_is_real(v)  ? json_integer((json_int_t)json_real_value(v))
					  : json_null();
	case DB_REAL:
		return json_is_number(v) ? json_real(json_number_value(v)) : json_null();
	case DB_BOOL:
		return json_is_boolean(v) ? json_integer(json_is_true(v)) : json_null();
	case DB_DATETIME:
		return json_is_string(v) && dbtable_parse_time_us(json_string_value(v)) >= 0 ? json_incref(v)
											      : json_null();
	case DB_MICROS: {
		int64_t us = json_is_string(v) ? dbtable_parse_time_us(json_string_value(v)) : -1;
		return us >= 0 ? json_integer(us) : json_null();
	}
	}
	return json_null();
}

json_t *dbtable_row(const struct db_table *t, json_t *obj, const char *host)
{
	json_t *row = json_object();
	const char *time_iso = json_string_value(json_object_get(obj, "time"));
	char now_iso[40];

	if (!row)
		return NULL;
	/* the key is never null: a record without a time is stamped now */
	if (dbtable_parse_time_us(time_iso) < 0) {
		dbtable_format_time_us(dbtable_now_us(), now_iso, sizeof(now_iso));
		time_iso = now_iso;
	}
	for (int i = 0; i < t->ncols; i++) {
		const struct db_column *c = &t->cols[i];
		json_t *v;

		if (!c->field)
			v = json_string(host);
		else if (c->key && !strcmp(c->field, "time")) {
			json_t *s = json_string(time_iso);
			v = value(c, s);
			json_decref(s);
		} else if (c->stack_id) {
			const char *stack = json_string_value(json_object_get(obj, c->field));
			v = stack ? json_integer(profrows_stack_id(stack)) : json_null();
		} else {
			v = value(c, json_object_get(obj, c->field));
			if (c->key && json_is_null(v)) {
				json_decref(v);
				v = c->type == DB_STRING ? json_string("") : json_integer(0);
			}
		}
		json_object_set_new(row, c->name, v ? v : json_null());
	}
	return row;
}

const char *dbtable_host(void)
{
	static char host[256];

	if (!host[0] && gethostname(host, sizeof(host) - 1))
		strcpy(host, "unknown");
	return host;
}

int dbtable_collect(const struct schema *const *const *lists, int nlists, const struct schema **out, int max)
{
	int n = 0;

	for (int l = 0; l < nlists; l++)
		for (const struct schema *const *s = lists[l]; s && *s; s++) {
			bool seen = false;
			if (!dbtable_wanted(*s))
				continue;
			for (int i = 0; i < n; i++)
				seen |= out[i] == *s;
			if (!seen && n < max)
				out[n++] = *s;
		}
	return n;
}
