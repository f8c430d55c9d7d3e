/*
 * A speedscope file as speedscope.c writes it, read back (profload.h) by jansson:
 * every sampled profile's samples (frame indices root first; the profiles are the
 * threads, their names left out) as folded stacks, each weight (nanoseconds) divided
 * by the sampling period that speedscope.c notes in its "pyebpf" member for pystack:
 * the samples again. Without that member the file holds no samples of pystack's
 * (another tool's, or not this project's).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "profload.h"

#define KIND "not a speedscope file pystack wrote (-o FILE.speedscope.json)"
#define SCHEMA "https://www.speedscope.app/file-format-schema.json"

struct sframe {
	const char *name, *file;
	json_int_t line;
};

/* The shared frames' parts into *out (free it); their number, or -1 (why in *why). */
static long frames(json_t *root, struct sframe **out, const char **why)
{
	json_t *a = json_object_get(json_object_get(root, "shared"), "frames");
	size_t n = json_array_size(a);
	struct sframe *v;

	*out = NULL;
	if (!json_is_array(a)) {
		*why = "no shared frames";
		return -1;
	}
	if (!(v = calloc(n ? n : 1, sizeof(*v)))) {
		*why = "out of memory";
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *f = json_array_get(a, i), *file = json_object_get(f, "file"), *line = json_object_get(f, "line");

		v[i].name = json_string_value(json_object_get(f, "name"));
		v[i].file = file ? json_string_value(file) : "";
		v[i].line = line ? json_integer_value(line) : 0;
		if (!v[i].name || !v[i].file || (line && !json_is_integer(line))) {
			*why = "a frame without a name, or a file or line of the wrong type";
			free(v);
			return -1;
		}
	}
	*out = v;
	return (long)n;
}

/* One sampled profile's stacks to fn; NULL, or why not. */
static const char *profile(json_t *p, const struct sframe *fr, size_t nframes, json_int_t period,
			   struct profload_stack *st, profload_fn fn, void *ctx)
{
	json_t *samples = json_object_get(p, "samples"), *weights = json_object_get(p, "weights");
	const char *type = json_string_value(json_object_get(p, "type"));

	if (!type || strcmp(type, "sampled"))
		return "a profile that is not \"sampled\"";
	if (!json_is_array(samples) || !json_is_array(weights) || json_array_size(samples) != json_array_size(weights))
		return "a profile's samples and weights do not pair up";
	for (size_t i = 0; i < json_array_size(samples); i++) {
		json_t *s = json_array_get(samples, i), *w = json_array_get(weights, i);
		json_int_t weight = json_integer_value(w);

		if (!json_is_array(s) || !json_is_integer(w) || weight < 0 || weight % period)
			return "a sample that is not a list of frames, or a weight not a multiple of the period";
		st->len = 0;
		for (size_t k = 0; k < json_array_size(s); k++) {
			json_t *x = json_array_get(s, k);
			json_int_t at = json_integer_value(x);
			if (!json_is_integer(x) || at < 0 || (size_t)at >= nframes)
				return "a sample of an unknown frame";
			if (profload_push(st, fr[at].name, fr[at].file, fr[at].line))
				return "out of memory";
		}
		if (st->len)
			fn(ctx, st->text, st->len, weight / period);
	}
	return NULL;
}

int speedscope_load(const uint8_t *data, size_t size, const char *name, profload_fn fn, void *ctx)
{
	json_error_t err;
	json_t *root = json_loadb((const char *)data, size, 0, &err), *ours, *profiles;
	struct profload_stack st = { 0 };
	struct sframe *fr = NULL;
	const char *why = NULL, *schema, *count;
	json_int_t period;
	long nframes;

	if (!root) {
		log_error("%s: not JSON (line %d: %s): %s", name, err.line, err.text, KIND);
		return -1;
	}
	schema = json_string_value(json_object_get(root, "$schema"));
	ours = json_object_get(root, "pyebpf");
	count = json_string_value(json_object_get(ours, "count"));
	period = json_integer_value(json_object_get(ours, "period_ns"));
	profiles = json_object_get(root, "profiles");
	if (!schema || strcmp(schema, SCHEMA))
		why = "not speedscope's schema";
	else if (!count || strcmp(count, "samples") || period <= 0)
		why = "no pystack samples (its \"pyebpf\" count and sampling period)";
	else if (!json_is_array(profiles))
		why = "no profiles";
	else if ((nframes = frames(root, &fr, &why)) >= 0)
		for (size_t i = 0; !why && i < json_array_size(profiles); i++)
			why = profile(json_array_get(profiles, i), fr, (size_t)nframes, period, &st, fn, ctx);
	if (why)
		log_error("%s: %s: %s", name, why, KIND);
	profload_free(&st);
	free(fr);
	json_decref(root);
	return why ? -1 : 0;
}
