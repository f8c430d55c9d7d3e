#include "out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "utf8.h"

struct out {
	bool json;
	bool header_done;
	const char *env;
	const struct out_column *cols;
};

struct out *out_open(bool json, const char *env, const struct out_column *cols)
{
	struct out *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->json = json;
	o->env = env;
	o->cols = cols;
	/* results reach pipes line by line, as a user watching `| grep` expects */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return o;
}

static void print_header(struct out *o)
{
	for (const struct out_column *c = o->cols; c->key; c++)
		printf("%s%*s", c == o->cols ? "" : " ", c->width, c->header);
	putchar('\n');
	o->header_done = true;
}

static void print_value(const json_t *v, int width)
{
	char buf[64];
	const char *s = buf;

	if (json_is_string(v))
		s = json_string_value(v);
	else if (json_is_integer(v))
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, sizeof(buf), "%.3f", json_real_value(v));
	else if (json_is_true(v) || json_is_false(v))
		s = json_is_true(v) ? "yes" : "no";
	else
		s = "-";
	printf("%*s", width, s);
}

void out_event(struct out *o, json_t *obj)
{
	if (o->env)
		json_set_str(obj, "env", o->env);
	if (o->json) {
		/* 15 digits: jansson's default 17 prints 166.365 as 166.36500000000001 */
		char *line = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
		if (line) {
			puts(line);
			free(line);
		}
	} else {
		if (!o->header_done)
			print_header(o);
		for (const struct out_column *c = o->cols; c->key; c++) {
			if (c != o->cols)
				putchar(' ');
			print_value(json_object_get(obj, c->key), c->width);
		}
		putchar('\n');
	}
	json_decref(obj);
}

void out_summary(struct out *o, const char *title, json_t *obj)
{
	const char *key;
	json_t *v;

	fprintf(stderr, "%s: %s:", log_progname, title);
	json_object_foreach(obj, key, v)
	{
		char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
		fprintf(stderr, " %s=%s", key, s ? s : "?");
		free(s);
	}
	fputc('\n', stderr);
	if (o->json) {
		json_incref(obj);
		out_event(o, obj);
	}
	json_decref(obj);
}

int out_close(struct out *o)
{
	int failed = fflush(stdout) != 0 || ferror(stdout);

	if (failed && errno != EPIPE)
		log_error("could not write results to stdout: %s", strerror(errno));
	free(o);
	return failed ? -1 : 0;
}

void json_set_strn(json_t *obj, const char *key, const char *s, size_t len)
{
	char stackbuf[512];
	size_t cap = len * 3 + 1;
	char *buf = cap <= sizeof(stackbuf) ? stackbuf : malloc(cap);

	if (!buf)
		return;
	utf8_repair(s, len, buf, cap);
	json_object_set_new(obj, key, json_string(buf));
	if (buf != stackbuf)
		free(buf);
}

void json_set_str(json_t *obj, const char *key, const char *s)
{
	if (!s)
		json_object_set_new(obj, key, json_null());
	else
		json_set_strn(obj, key, s, strlen(s));
}

void json_set_int(json_t *obj, const char *key, json_int_t v)
{
	json_object_set_new(obj, key, json_integer(v));
}

void json_set_real(json_t *obj, const char *key, double v)
{
	/* three decimals are what a human and a diff want; jansson would print 17 digits */
	json_object_set_new(obj, key, json_real((double)(long long)(v * 1000.0 + (v < 0 ? -0.5 : 0.5)) / 1000.0));
}

void json_set_hex(json_t *obj, const char *key, uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
	json_object_set_new(obj, key, json_string(buf));
}

uint64_t time_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void time_format_mono_ns(uint64_t mono_ns, char *buf, size_t len)
{
	static int64_t offset_ns; /* realtime - monotonic, taken once */
	struct timespec rt;
	struct tm tm;
	int64_t wall;
	time_t sec;

	if (!offset_ns) {
		clock_gettime(CLOCK_REALTIME, &rt);
		offset_ns = (int64_t)rt.tv_sec * 1000000000ll + rt.tv_nsec - (int64_t)time_mono_ns();
	}
	wall = (int64_t)mono_ns + offset_ns;
	sec = (time_t)(wall / 1000000000ll);
	gmtime_r(&sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)(wall % 1000000000ll) / 1000);
}
