#include "jsonfmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "utf8.h"

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

uint64_t time_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t time_self_cpu_us(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
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
