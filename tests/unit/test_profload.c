/*
 * Profile files read back (src/pictures/profload.h, pprof_load.c, speedscope_load.c,
 * profdiff_read): stacks written by the real writers (profile_write) as folded text,
 * pprof and speedscope, read back: the loaders give exactly the written (stack,
 * samples) pairs, and profdiff_read the same baseline from each of the three files.
 * Files that are not pystack's (another tool's pprof, an off-CPU speedscope file,
 * broken ids, cut gzip, foreign JSON, an SVG) are refused with one line each.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "profdiff.h"
#include "profile.h"
#include "profile.pb-c.h"
#include "profload.h"
#include "stackagg.h"

static char dir[] = "/tmp/pyebpf-profload-XXXXXX";
static char path[256];

/* What pystack's profile holds (per_thread: the thread first); counts as its -f prints them. */
static const struct {
	const char *stack;
	long long n;
} stacks[] = {
	{ "MainThread;<module> (/srv/app.py:40);split (/srv/app.py:30);a (/srv/app.py:12);work (/srv/app.py:5)", 700 },
	{ "MainThread;<module> (/srv/app.py:40);split (/srv/app.py:30);b (/srv/app.py:16);work (/srv/app.py:5)", 290 },
	{ "MainThread;<module> (/srv/app.py:40);split (/srv/app.py:30);b (/srv/app.py:16);work (/srv/app.py:6)", 11 },
	{ "worker-1;[truncated];run (/usr/lib/python3.11/threading.py:975);c (/srv/app.py:20)", 3 },
	{ "worker-1;[unknown: no thread state];[unknown] [libc.so.6]", 1 },
	{ "worker-2;<module> (/srv/app.py:40);split (/srv/app.py:30);a (/srv/app.py:12);work (/srv/app.py:5)", 5 },
	{ "worker-2;f (/srv/weird:name.py:0)", 0 }, /* no samples: still a stack */
	{ "worker-2;g (/srv/x.py)", 2 },                /* per function: all name */
};
#define NSTACKS (sizeof(stacks) / sizeof(stacks[0]))

static const struct profile_meta pystack_meta = {
	.title = "pystack", .count_name = "samples", .weight_name = "cpu", .period_ns = 1000000000ull / 999,
};

static void fill(struct stackagg *a, bool per_thread)
{
	stackagg_init(a);
	for (size_t i = 0; i < NSTACKS; i++) {
		const char *s = per_thread ? stacks[i].stack : strchr(stacks[i].stack, ';') + 1;
		struct stackagg_entry *e = stackagg_get(a, s, strlen(s));
		e->self += stacks[i].n;
	}
}

/* agg written to dir/name by the real writer; the path. */
static const char *write_as(const char *name, const struct stackagg *agg, const struct profile_meta *m)
{
	struct profile_out o = { 0 };

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(profile_option(&o, false, path), 0);
	assert_int_equal(profile_check(&o), 0);
	assert_int_equal(profile_write(&o, agg, m), 0);
	return path;
}

static uint8_t *slurp(const char *p, size_t *size)
{
	FILE *f = fopen(p, "rb");
	uint8_t *buf = malloc(1 << 20);

	assert_non_null(f);
	*size = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

static void collect(void *ctx, const char *stack, size_t len, long long samples)
{
	struct stackagg_entry *e = stackagg_get(ctx, stack, len);

	e->self += samples;
	e->total++; /* times given */
}

/* got holds exactly want's stacks and counts (in any order). */
static void assert_same(const struct stackagg *got, const struct stackagg *want)
{
	assert_int_equal(got->n, want->n);
	for (size_t i = 0; i < want->n; i++) {
		bool found = false;
		for (size_t k = 0; k < got->n; k++)
			if (!strcmp(got->v[k].key, want->v[i].key)) {
				assert_int_equal(got->v[k].self, want->v[i].self);
				found = true;
			}
		if (!found)
			fail_msg("missing: %s", want->v[i].key);
	}
}

/* The loaders give the very stacks and counts written (threads left out, summed). */
static void test_loaders_give_the_written_pairs(void **state)
{
	const struct profile_meta per_thread = { .title = "pystack", .count_name = "samples", .weight_name = "cpu",
						 .period_ns = 1000000000ull / 999, .per_thread = true };
	struct stackagg plain, threads, got;
	uint8_t *data;
	size_t size;

	(void)state;
	fill(&plain, false);
	fill(&threads, true);
	for (int pt = 0; pt < 2; pt++) {
		const struct profile_meta *m = pt ? &per_thread : &pystack_meta;
		const struct stackagg *agg = pt ? &threads : &plain;

		stackagg_init(&got);
		data = slurp(write_as("p.pb.gz", agg, m), &size);
		assert_int_equal(pprof_load(data, size, "t", collect, &got), 0);
		assert_same(&got, &plain);
		/* one sample per stack; per thread, MainThread's and worker-2's of a() each */
		for (size_t k = 0; k < got.n; k++)
			assert_int_equal(got.v[k].total, pt && strstr(got.v[k].key, "a (") ? 2 : 1);
		free(data);
		stackagg_free(&got);

		stackagg_init(&got);
		data = slurp(write_as("p.speedscope.json", agg, m), &size);
		assert_int_equal(speedscope_load(data, size, "t", collect, &got), 0);
		assert_same(&got, &plain);
		free(data);
		stackagg_free(&got);
	}
	/* two threads on one stack: one pair each, summed */
	stackagg_init(&got);
	stackagg_get(&threads, "worker-9;g (/srv/x.py)", 22)->self = 5;
	data = slurp(write_as("p.speedscope.json", &threads, &per_thread), &size);
	assert_int_equal(speedscope_load(data, size, "t", collect, &got), 0);
	assert_int_equal(stackagg_get(&got, "g (/srv/x.py)", 13)->self, 7);
	assert_int_equal(stackagg_get(&got, "g (/srv/x.py)", 13)->total, 2);
	free(data);
	stackagg_free(&got);
	stackagg_free(&plain);
	stackagg_free(&threads);
}

/* profdiff_read: the same baseline, by function, from each of the three files of one profile. */
static void test_baseline_the_same_from_each_file(void **state)
{
	struct stackagg plain, threads, want, got;

	(void)state;
	fill(&plain, false);
	fill(&threads, true); /* speedscope's profiles are the threads: pystack writes it per thread */
	stackagg_init(&want);
	profdiff_add_all(&want, &plain);
	for (int i = 0; i < 3; i++) {
		static const char *const names[] = { "b.txt", "b.pb.gz", "b.speedscope.json" };
		const struct profile_meta per_thread = { .title = "pystack", .count_name = "samples", .weight_name = "cpu",
							 .period_ns = 1000000000ull / 97, .per_thread = i == 2 };
		stackagg_init(&got);
		assert_int_equal(profdiff_read(write_as(names[i], i == 2 ? &threads : &plain, &per_thread), &got), 0);
		assert_same(&got, &want);
		unlink(path);
		stackagg_free(&got);
	}
	stackagg_free(&want);
	stackagg_free(&plain);
	stackagg_free(&threads);
}

/* stderr while fn runs, into buf. */
static int captured(char *buf, size_t size, int (*fn)(const char *), const char *arg)
{
	int saved = dup(2), fd = open(dir, O_TMPFILE | O_RDWR, 0600), r;
	ssize_t n;

	assert_true(fd >= 0);
	fflush(stderr);
	dup2(fd, 2);
	r = fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, size - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
	return r;
}

static int read_baseline(const char *p)
{
	struct stackagg a;
	int r;

	stackagg_init(&a);
	r = profdiff_read(p, &a);
	stackagg_free(&a);
	return r;
}

/* A good pystack pprof profile, changed by change, repacked and gzipped to path. */
static const char *pprof_changed(void (*change)(Perftools__Profiles__Profile *))
{
	struct stackagg plain;
	uint8_t *data, *packed;
	size_t size;
	z_stream z = { 0 };
	Perftools__Profiles__Profile *p;
	gzFile gz;

	fill(&plain, false);
	data = slurp(write_as("c.pb.gz", &plain, &pystack_meta), &size);
	stackagg_free(&plain);
	/* gunzip by zlib here, as pprof would */
	packed = malloc(1 << 20);
	assert_int_equal(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
	z.next_in = data, z.avail_in = (uInt)size, z.next_out = packed, z.avail_out = 1 << 20;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	p = perftools__profiles__profile__unpack(NULL, z.total_out, packed);
	inflateEnd(&z);
	assert_non_null(p);
	change(p);
	size = perftools__profiles__profile__pack(p, packed);
	gz = gzopen(path, "wb");
	gzwrite(gz, packed, (unsigned)size);
	gzclose(gz);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(packed);
	free(data);
	return path;
}

static void location_out_of_range(Perftools__Profiles__Profile *p) { p->sample[0]->location_id[0] = 999; }
static void string_out_of_range(Perftools__Profiles__Profile *p) { p->function[0]->name = 100000; }
static void ids_out_of_order(Perftools__Profiles__Profile *p) { p->location[0]->id = 7; }
static void negative_samples(Perftools__Profiles__Profile *p) { p->sample[1]->value[0] = -4; }
static void fewer_values(Perftools__Profiles__Profile *p) { p->sample[1]->n_value = 1; }

static void test_not_pystack_files(void **state)
{
	static const struct {
		const char *body; /* written as is; NULL: made by what */
		const char *what;
		const char *says;
	} cases[] = {
		{ "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", NULL, "cut gzip stream" },
		{ "\x1f\x8b\x01\x02garbage", NULL, "broken or cut gzip" },
		{ "{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\"}", NULL, "no pystack samples" },
		{ "{\"a\": 1}", NULL, "not speedscope's schema" },
		{ "  {\"a\": ", NULL, "not JSON" },
		{ "<svg xmlns=\"http://www.w3.org/2000/svg\">\n</svg>\n", NULL, "not folded stacks" },
		/* the sums would overflow (found by tests/fuzz/fuzz_baseline.c) */
		{ "a 9223372036854775807\nb 1\n", NULL, "line 2: more samples than can be counted" },
		{ "{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\", \"pyebpf\": {\"count\": "
		  "\"samples\", \"period_ns\": 1}, \"shared\": {\"frames\": [{\"name\": \"f\"}]}, \"profiles\": "
		  "[{\"type\": \"sampled\", \"samples\": [[0], [0]], \"weights\": [9223372036854775807, 1]}]}",
		  NULL, "more samples than can be counted" },
		{ "{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\", \"pyebpf\": {\"count\": "
		  "\"samples\", \"period_ns\": 10}, \"shared\": {\"frames\": [{\"name\": \"f\"}]}, \"profiles\": "
		  "[{\"type\": \"sampled\", \"samples\": [[0], [1]], \"weights\": [10, 20]}]}",
		  NULL, "a sample of an unknown frame" },
		{ "{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\", \"pyebpf\": {\"count\": "
		  "\"samples\", \"period_ns\": 10}, \"shared\": {\"frames\": [{\"name\": \"f\"}]}, \"profiles\": "
		  "[{\"type\": \"sampled\", \"samples\": [[0]], \"weights\": [15]}]}",
		  NULL, "not a multiple of the period" },
		{ "{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\", \"pyebpf\": {\"count\": "
		  "\"samples\", \"period_ns\": 10}, \"shared\": {\"frames\": [{\"name\": \"f\"}]}, \"profiles\": "
		  "[{\"type\": \"evented\", \"events\": []}]}",
		  NULL, "not \"sampled\"" },
		{ "{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\", \"pyebpf\": {\"count\": "
		  "\"samples\", \"period_ns\": 10}, \"shared\": {\"frames\": []}, \"profiles\": []}",
		  NULL, "no samples in it" },
		{ NULL, "pygc", "not pystack's" },
		{ NULL, "pyoffcpu", "no pystack samples" },
		{ NULL, "location", "unknown location" },
		{ NULL, "string", "strings out of order" },
		{ NULL, "ids", "id out of order" },
		{ NULL, "negative", "values do not match" },
		{ NULL, "values", "values do not match" },
	};
	const struct profile_meta pygc = { .title = "pygc", .count_name = "collections", .weight_name = "pause",
					   .by_weight = true };
	const struct profile_meta offcpu = { .title = "pyoffcpu", .count_name = "periods", .weight_name = "off_cpu",
					     .per_thread = true };
	struct stackagg plain;
	char err[2048];

	(void)state;
	fill(&plain, false);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *p = path, *w = cases[i].what;

		if (cases[i].body) {
			FILE *f;
			snprintf(path, sizeof(path), "%s/bad", dir);
			f = fopen(path, "w");
			fputs(cases[i].body, f);
			fclose(f);
		} else if (!strcmp(w, "pygc"))
			write_as("gc.pb.gz", &plain, &pygc);
		else if (!strcmp(w, "pyoffcpu"))
			write_as("off.speedscope.json", &plain, &offcpu);
		else
			pprof_changed(!strcmp(w, "location") ? location_out_of_range
				      : !strcmp(w, "string") ? string_out_of_range
				      : !strcmp(w, "ids") ? ids_out_of_order
				      : !strcmp(w, "negative") ? negative_samples
							     : fewer_values);
		assert_int_equal(captured(err, sizeof(err), read_baseline, p), -1);
		printf("   %s", err[0] ? strchr(err, ' ') + 1 : "(nothing)");
		/* one line, naming the option and the file */
		assert_non_null(strstr(err, "--baseline "));
		assert_non_null(strstr(err, cases[i].says));
		assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
		unlink(path);
	}
	stackagg_free(&plain);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loaders_give_the_written_pairs),
		cmocka_unit_test(test_baseline_the_same_from_each_file),
		cmocka_unit_test(test_not_pystack_files),
	};
	int r;

	if (!mkdtemp(dir))
		return 1;
	r = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return r;
}
