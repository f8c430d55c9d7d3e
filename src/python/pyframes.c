#include "pyframes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonfmt.h"

/* Threads kept per process for their names. */
#define NAMES_MAX 256

int pyframes_depth(unsigned depth, int size, size_t head)
{
	if (depth > PYWALK_DEPTH_LIMIT || size < 0 ||
	    (size_t)size < head + (size_t)depth * sizeof(struct pywalk_frame))
		return 0;
	return (int)depth;
}

int pyframes_resolve(struct pyproc *py, const struct pywalk_frame *frames, int depth,
		     struct pycode_loc *locs)
{
	int unresolved = 0;

	for (int i = 0; i < depth; i++) {
		if (py && !pyproc_code_location(py, frames[i].code, frames[i].instr, frames[i].firstlineno,
						&locs[i]))
			continue;
		if (!py) {
			snprintf(locs[i].func, sizeof(locs[i].func), "[unknown]");
			locs[i].file[0] = 0;
			locs[i].line = locs[i].firstlineno = 0;
		}
		unresolved++;
	}
	return unresolved;
}

int pyframes_format(const struct pycode_loc *loc, char *buf, size_t len)
{
	if (loc->file[0])
		return snprintf(buf, len, "%s (%s:%d)", loc->func, loc->file, loc->line);
	return snprintf(buf, len, "%s", loc->func);
}

void pyframes_by_function(struct pycode_loc *locs, int depth)
{
	for (int i = 0; i < depth; i++)
		if (locs[i].firstlineno > 0)
			locs[i].line = locs[i].firstlineno;
}

const char *pyframes_marker(unsigned status, bool detail)
{
	static const char *const why[] = {
		[PYWALK_NO_THREAD] = "[unknown: no Python thread state]",
		[PYWALK_ERR_CONFIG] = "[unknown: process not configured yet]",
		[PYWALK_ERR_THREADS] = "[unknown: thread list unreadable]",
		[PYWALK_ERR_FRAME] = "[unknown: frame unreadable]",
		[PYWALK_ERR_CODE] = "[unknown: code object unreadable]",
	};

	if (status == PYWALK_COMPLETE)
		return NULL;
	if (status == PYWALK_TRUNCATED)
		return "[truncated]";
	if (!detail)
		return "[error]";
	return status < sizeof(why) / sizeof(why[0]) && why[status] ? why[status] : "[unknown: walk failed]";
}

void pyframes_buf_free(struct pyframes_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Room for n more bytes and a NUL; false when out of memory. */
static bool reserve(struct pyframes_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 1024;
	char *p;

	if (b->len + n + 1 <= b->cap)
		return true;
	while (cap < b->len + n + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return false;
	b->p = p;
	b->cap = cap;
	return true;
}

/* Appends s (n bytes) after a ';' unless it is the first part, its from bytes made to. */
static void add_part(struct pyframes_buf *b, bool *first, const char *s, size_t n, const char *from,
		     char to)
{
	if (!reserve(b, n + 1))
		return;
	if (!*first)
		b->p[b->len++] = ';';
	*first = false;
	for (size_t i = 0; i < n; i++)
		b->p[b->len++] = strchr(from, s[i]) ? to : s[i];
	b->p[b->len] = 0;
}

const char *pyframes_folded(struct pyframes_buf *b, const char *root, const struct pycode_loc *locs,
			    int depth, unsigned status)
{
	const char *marker = pyframes_marker(status, false);
	bool first = true;
	char frame[900];

	b->len = 0;
	if (!reserve(b, 0))
		return "";
	b->p[0] = 0;
	if (root)
		add_part(b, &first, root, strlen(root), "; ", '_');
	if (marker)
		add_part(b, &first, marker, strlen(marker), "", 0);
	for (int i = depth - 1; i >= 0; i--) {
		int n = pyframes_format(&locs[i], frame, sizeof(frame));
		add_part(b, &first, frame, n < (int)sizeof(frame) ? (size_t)n : sizeof(frame) - 1, ";", ',');
	}
	return b->p;
}

void pythread_names_free(struct pythread_names *c)
{
	free(c->threads);
	memset(c, 0, sizeof(*c));
}

/* The entry of tid, or NULL. */
static const struct pythread *thread_of(const struct pythread_names *c, pid_t tid)
{
	for (int i = 0; i < c->n; i++)
		if (c->threads[i].tid == tid)
			return &c->threads[i];
	return NULL;
}

void pyframes_thread_name(struct pyproc *py, struct pythread_names *c, pid_t tid, const char *comm,
			  size_t commlen, char *buf, size_t len)
{
	const struct pythread *t = NULL;

	if (py && !c->threads)
		c->threads = calloc(NAMES_MAX, sizeof(*c->threads));
	for (int pass = 0; py && c->threads && pass < 2; pass++) {
		uint64_t now;

		t = thread_of(c, tid);
		if (t && t->python_name)
			break;
		now = time_mono_ns();
		if (pass || now - c->read_ns < (t ? 1000000000ull : 200000000ull))
			break;
		c->read_ns = now;
		c->n = pyproc_threads(py, c->threads, NAMES_MAX);
		if (c->n < 0)
			c->n = 0;
	}
	if (t && t->python_name && t->name[0])
		snprintf(buf, len, "%s", t->name);
	else if (py && tid == pyproc_pid(py))
		/* threading not imported (or not this thread's name yet): what it calls the main thread */
		snprintf(buf, len, "MainThread");
	else
		snprintf(buf, len, "%.*s", (int)commlen, comm);
}

const struct pythread *pyframes_thread_of_tstate(struct pyproc *py, struct pythread_names *c,
						 uint64_t tstate)
{
	const struct pythread *t = NULL;

	for (int pass = 0; py && tstate && pass < 2; pass++) {
		uint64_t now;

		if (!c->threads && !(c->threads = calloc(NAMES_MAX, sizeof(*c->threads))))
			return NULL;
		uint64_t id = 0;

		t = NULL;
		for (int i = 0; i < c->n && !t; i++)
			if (c->threads[i].tstate == tstate)
				t = &c->threads[i];
		/*
		 * a new thread's state is made by its parent (with the parent's ids, 3.11)
		 * and bound by the thread itself: one read tells whether the entry is stale
		 */
		if (t && (pyproc_read(py, tstate + pyproc_offsets(py)->ts_thread_id, &id, sizeof(id)) ||
			  id != t->thread_id))
			t = NULL;
		if (t && t->python_name && t->tid)
			break;
		now = time_mono_ns();
		/*
		 * an unknown one, or one not matched to its task yet, is a thread that just
		 * started (the GIL holder of the next waits too): reread after 20 ms; one
		 * without a Python name yet, every second
		 */
		if (pass || now - c->read_ns < (t && t->tid ? 1000000000ull : 20000000ull))
			break;
		c->read_ns = now;
		c->n = pyproc_threads(py, c->threads, NAMES_MAX);
		if (c->n < 0)
			c->n = 0;
	}
	return t;
}
