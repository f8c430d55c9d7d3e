/*
 * ClickHouse's HTTP replies (src/run/sink_clickhouse.c): what the sink makes of a
 * server's answer, status line, headers and body, through libcurl as in a run: the
 * start-up check that classifies refusals (wrong password, no database) and the
 * insert whose status decides between retry and drop. A server on 127.0.0.1 in this
 * process answers every request with the input, byte for byte, and closes. The sink
 * is compiled in here to reach its request functions.
 *
 * Left out: a reply whose first header line is a continuation (starts with a space or
 * a tab right after the status line). Debian 12's libcurl 7.88.1 then reads freed
 * memory inside curl_easy_perform, now and then (ASan; corpus/clickhouse/libcurl-*):
 * a bug of libcurl, which this code cannot avoid; the fuzzer would find it again and
 * again.
 */
#include "fuzz.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include "run/sink_clickhouse.c"

/* the harness's copy of the input: a late connection may still be answered after it returned */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *reply;
static size_t reply_len;

/* Reads a request to the end of its headers (its body is empty), answers, closes. */
static void *serve(void *arg)
{
	int ls = (int)(intptr_t)arg;

	for (;;) {
		int fd = accept(ls, NULL, NULL);
		char buf[4096];
		size_t got = 0;
		ssize_t n;

		if (fd < 0)
			continue;
		while (got < sizeof(buf) - 1 && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0) {
			got += (size_t)n;
			buf[got] = 0;
			if (strstr(buf, "\r\n\r\n"))
				break;
		}
		pthread_mutex_lock(&lock);
		for (size_t at = 0; at < reply_len && (n = send(fd, reply + at, reply_len - at, MSG_NOSIGNAL)) > 0;)
			at += (size_t)n;
		pthread_mutex_unlock(&lock);
		shutdown(fd, SHUT_WR);
		/* the client closes first: no reset that could cut the reply short */
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
	}
	return NULL;
}

static struct ch_sink *sink_for_server(void)
{
	static struct ch_sink c;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	pthread_t t;
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 16) ||
	    getsockname(ls, (struct sockaddr *)&a, &alen) ||
	    pthread_create(&t, NULL, serve, (void *)(intptr_t)ls))
		abort();
	snprintf(c.url, sizeof(c.url), "http://127.0.0.1:%d", ntohs(a.sin_port));
	c.user = "default";
	c.database = "default";
	c.password = "secret";
	curl_global_init(CURL_GLOBAL_DEFAULT);
	return &c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ch_sink *c;
	static CURL *h;
	struct reply r;
	long status;

	{
		const uint8_t *eol = memchr(data, '\n', size);
		if (eol && eol + 1 < data + size && (eol[1] == ' ' || eol[1] == '\t'))
			return 0;
	}
	if (!c) {
		c = sink_for_server();
		h = curl_easy_init();
		if (!h)
			abort();
	}
	pthread_mutex_lock(&lock);
	free(reply);
	reply = malloc(size ? size : 1);
	memcpy(reply, data, size);
	reply_len = size;
	pthread_mutex_unlock(&lock);
	check_server(c, h);
	status = request(c, h, "INSERT INTO t FORMAT JSONEachRow", "{}\n", 3, &r);
	if (status && rejected(status))
		log_warn("rejected: HTTP %ld: %.300s", status, r.text);
	return 0;
}
