/*
 * Where records go. Trackers hand every record (a jansson object that follows its
 * schema) to a sink; the sink decides how it is written: BCC-style columns or JSON
 * lines on stdout today, databases later. Everything a tool prints as its result
 * goes through here, so the JSON keys, the columns and the schema cannot disagree.
 */
#ifndef PYEBPF_SINK_H
#define PYEBPF_SINK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "schema.h"

struct sink;

struct sink_ops {
	/* One record; obj is the caller's (already checked and tagged with env). */
	void (*record)(struct sink *s, const struct schema *sc, json_t *obj);
	/* A table starts: title (a line of its own, NULL for none), then its rows. */
	void (*table_begin)(struct sink *s, const struct schema *sc, const char *title);
	void (*table_row)(struct sink *s, const struct schema *sc, json_t *obj);
	/* The end-of-run counts (also said on stderr by sink_summary). */
	void (*summary)(struct sink *s, const struct schema *sc, json_t *obj);
	/* Free-form result text (histograms, folded stacks), or NULL when it has none. */
	FILE *(*text)(struct sink *s);
	/* Optional: from now on records may be held until flush (written in blocks). */
	void (*batch)(struct sink *s);
	/* Optional: writes what is held. */
	void (*flush)(struct sink *s);
	/* 0, or -1 once results could not be written (then the tool stops). */
	int (*status)(struct sink *s);
	/* Optional: an fd whose POLLERR/POLLHUP means nobody reads the results any more, or -1. */
	int (*watch_fd)(struct sink *s);
	/* Writes what is pending; 0, or -1 after saying why results were lost. Frees s. */
	int (*close)(struct sink *s);
};

struct sink {
	const struct sink_ops *ops;
	const char *env;      /* tags every record ("env") when not NULL */
	unsigned warned_misfit;
};

/* Results on stdout: JSON lines, or columns with a header line. */
struct sink *sink_stdout_open(bool json, const char *env);

/* Each takes obj (releases it). */
void sink_record(struct sink *s, const struct schema *sc, json_t *obj);
void sink_table_row(struct sink *s, const struct schema *sc, json_t *obj);
/* "tool: summary: key=value ..." on stderr, and the record to the sink. */
void sink_summary(struct sink *s, const struct schema *sc, json_t *obj);
/* The same with another title on stderr ("tool: TITLE: key=value ..."), e.g. one per group. */
void sink_summary_titled(struct sink *s, const struct schema *sc, const char *title, json_t *obj);
/*
 * An end-of-run result of the same shape (a per-process or per-generation line): in
 * columns "TITLE: key=value ..." on stdout with the other results, so `tool > out`
 * keeps it; in JSON the record, and the line on stderr.
 */
void sink_result_titled(struct sink *s, const struct schema *sc, const char *title, json_t *obj);
void sink_table_begin(struct sink *s, const struct schema *sc, const char *title);
FILE *sink_text(struct sink *s);
/*
 * For a tracker whose records come in storms: the sink may hold them and write them
 * in blocks rather than line by line. The runner flushes after every poll, so nothing
 * waits longer than the trackers' poll_ms.
 */
void sink_batch(struct sink *s);
void sink_flush(struct sink *s);
int sink_status(struct sink *s);
/* What the runner polls to end a run at once when the reader of the results is gone; -1: none. */
int sink_watch_fd(struct sink *s);
/* 0, also when the reader went away (a pipe into `head`); -1 after saying why results were lost. */
int sink_close(struct sink *s);

#endif
