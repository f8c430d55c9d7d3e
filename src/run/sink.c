#include "sink.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "jsonfmt.h"

/* Before a record reaches a sink: its keys must be its schema's, and env goes on. */
static void prepare(struct sink *s, const struct schema *sc, json_t *obj)
{
	const char *bad = schema_misfit(sc, obj);

	if (bad && s->warned_misfit++ < 3)
		log_warn("record %s has a key that is not in its schema: %s", sc->metric, bad);
	if (s->env)
		json_set_str(obj, "env", s->env);
}

void sink_record(struct sink *s, const struct schema *sc, json_t *obj)
{
	prepare(s, sc, obj);
	s->ops->record(s, sc, obj);
	json_decref(obj);
}

void sink_table_row(struct sink *s, const struct schema *sc, json_t *obj)
{
	prepare(s, sc, obj);
	s->ops->table_row(s, sc, obj);
	json_decref(obj);
}

void sink_table_begin(struct sink *s, const struct schema *sc, const char *title)
{
	s->ops->table_begin(s, sc, title);
}

void sink_summary(struct sink *s, const struct schema *sc, json_t *obj)
{
	sink_summary_titled(s, sc, "summary", obj);
}

/* "PREFIX: TITLE: key=value ..." (no prefix: "TITLE: key=value ...") on f. */
static void print_titled(FILE *f, const char *prefix, const char *title, json_t *obj)
{
	const char *key;
	json_t *v;

	if (prefix)
		fprintf(f, "%s: ", prefix);
	fprintf(f, "%s:", title);
	json_object_foreach(obj, key, v)
	{
		char *str = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
		fprintf(f, " %s=%s", key, str ? str : "?");
		free(str);
	}
	fputc('\n', f);
}

void sink_result_titled(struct sink *s, const struct schema *sc, const char *title, json_t *obj)
{
	FILE *text = sink_text(s);

	/* columns: a result line on stdout; JSON: the record, and the line for a human on stderr */
	if (text)
		print_titled(text, NULL, title, obj);
	else
		print_titled(stderr, log_progname, title, obj);
	prepare(s, sc, obj);
	s->ops->summary(s, sc, obj);
	json_decref(obj);
}

void sink_summary_titled(struct sink *s, const struct schema *sc, const char *title, json_t *obj)
{
	print_titled(stderr, log_progname, title, obj);
	prepare(s, sc, obj);
	s->ops->summary(s, sc, obj);
	json_decref(obj);
}

FILE *sink_text(struct sink *s)
{
	return s->ops->text ? s->ops->text(s) : NULL;
}

void sink_batch(struct sink *s)
{
	if (s && s->ops->batch)
		s->ops->batch(s);
}

void sink_flush(struct sink *s)
{
	if (s && s->ops->flush)
		s->ops->flush(s);
}

int sink_status(struct sink *s)
{
	return s->ops->status(s);
}

int sink_watch_fd(struct sink *s)
{
	return s && s->ops->watch_fd ? s->ops->watch_fd(s) : -1;
}

int sink_close(struct sink *s)
{
	return s ? s->ops->close(s) : 0;
}

/* stdout: JSON lines or columns */

struct stdout_sink {
	struct sink base;
	const struct field *header_of; /* the fields whose header line was printed last */
	int write_errno;               /* why the first failed write failed */
};

static void json_line(json_t *obj)
{
	/* 15 digits: jansson's default 17 prints 166.365 as 166.36500000000001 */
	char *line = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));

	if (line) {
		puts(line);
		free(line);
	}
}

static void json_record(struct sink *s, const struct schema *sc, json_t *obj)
{
	(void)s, (void)sc;
	json_line(obj);
}

static void json_table_begin(struct sink *s, const struct schema *sc, const char *title)
{
	(void)s, (void)sc, (void)title;
}

static FILE *json_text(struct sink *s)
{
	(void)s;
	return NULL;
}

static int stdout_status(struct sink *s)
{
	struct stdout_sink *o = (struct stdout_sink *)s;

	if (!ferror(stdout))
		return 0;
	/* the first look after the failed write: errno is most likely still its reason */
	if (!o->write_errno)
		o->write_errno = errno;
	return -1;
}

static void stdout_batch(struct sink *s)
{
	(void)s;
	/* a block write per poll rather than one per line; stdout_flush empties it */
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
}

static void stdout_flush(struct sink *s)
{
	(void)s;
	fflush(stdout);
}

/* A pipe or socket: its reader can go away, and poll says so before any write fails. */
static int stdout_watch_fd(struct sink *s)
{
	struct stat st;

	(void)s;
	return fstat(STDOUT_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
		       ? STDOUT_FILENO
		       : -1;
}

static bool stdout_reader_gone(void)
{
	struct pollfd p = { .fd = STDOUT_FILENO, .events = 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

static int stdout_close(struct sink *s)
{
	struct stdout_sink *o = (struct stdout_sink *)s;
	int failed = fflush(stdout) != 0 || ferror(stdout);
	int err = o->write_errno ? o->write_errno : errno;

	free(s);
	/* `tool | head`: the reader has all it wanted; that is no failure of ours */
	if (!failed || stdout_reader_gone())
		return 0;
	log_error("could not write results to stdout: %s", strerror(err));
	return -1;
}

#define MAX_COLUMNS 32

static void print_header(const struct schema *sc)
{
	const struct field *cols[MAX_COLUMNS];
	int n = schema_columns(sc, cols, MAX_COLUMNS);

	for (int i = 0; i < n; i++)
		printf("%s%*s", i ? " " : "", cols[i]->width, cols[i]->header);
	putchar('\n');
}

static void print_value(const struct field *f, const json_t *v)
{
	char buf[64];
	const char *s = buf;

	if (json_is_string(v) && !f->fmt)
		s = json_string_value(v);
	else if (json_is_string(v))
		snprintf(buf, sizeof(buf), f->fmt, json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, sizeof(buf), f->fmt ? f->fmt : "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, sizeof(buf), f->fmt ? f->fmt : "%.3f", json_real_value(v));
	else if (json_is_true(v) || json_is_false(v))
		s = json_is_true(v) ? "yes" : "no";
	else
		s = "-";
	printf("%*s", f->width, s);
}

static void print_row(const struct schema *sc, json_t *obj)
{
	const struct field *cols[MAX_COLUMNS];
	int n = schema_columns(sc, cols, MAX_COLUMNS);

	for (int i = 0; i < n; i++) {
		if (i)
			putchar(' ');
		print_value(cols[i], json_object_get(obj, cols[i]->name));
	}
	putchar('\n');
}

static void columns_record(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct stdout_sink *o = (struct stdout_sink *)s;

	/* one header per stream; again when records of other columns come in between */
	if (o->header_of != sc->fields) {
		print_header(sc);
		o->header_of = sc->fields;
	}
	print_row(sc, obj);
}

static void columns_table_begin(struct sink *s, const struct schema *sc, const char *title)
{
	struct stdout_sink *o = (struct stdout_sink *)s;

	if (title)
		puts(title);
	print_header(sc);
	o->header_of = sc->fields;
}

static void columns_table_row(struct sink *s, const struct schema *sc, json_t *obj)
{
	(void)s;
	print_row(sc, obj);
}

static void columns_summary(struct sink *s, const struct schema *sc, json_t *obj)
{
	/* in columns mode the summary is the stderr line only */
	(void)s, (void)sc, (void)obj;
}

static FILE *columns_text(struct sink *s)
{
	(void)s;
	return stdout;
}

static const struct sink_ops json_ops = {
	.record = json_record,
	.table_begin = json_table_begin,
	.table_row = json_record,
	.summary = json_record,
	.text = json_text,
	.batch = stdout_batch,
	.flush = stdout_flush,
	.status = stdout_status,
	.watch_fd = stdout_watch_fd,
	.close = stdout_close,
};

static const struct sink_ops columns_ops = {
	.record = columns_record,
	.table_begin = columns_table_begin,
	.table_row = columns_table_row,
	.summary = columns_summary,
	.text = columns_text,
	.batch = stdout_batch,
	.flush = stdout_flush,
	.status = stdout_status,
	.watch_fd = stdout_watch_fd,
	.close = stdout_close,
};

struct sink *sink_stdout_open(bool json, const char *env)
{
	struct stdout_sink *o;

	/*
	 * `tool >&-`: the next file the tool opens would become fd 1 and receive the
	 * results (or a BPF object's bytes); say so before anything is opened.
	 */
	if (fcntl(STDOUT_FILENO, F_GETFL) < 0) {
		log_error("stdout is closed: there is nowhere to write the results");
		return NULL;
	}
	if (!(o = calloc(1, sizeof(*o))))
		return NULL;
	o->base.ops = json ? &json_ops : &columns_ops;
	o->base.env = env;
	/* results reach pipes line by line, as a user watching `| grep` expects */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return &o->base;
}
