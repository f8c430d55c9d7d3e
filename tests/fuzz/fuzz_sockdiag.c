/*
 * sock_diag replies (src/host/sockdiag.c): the netlink messages a dump of TCP
 * sockets returns, parsed by hostnet's counts and pyhandoff's listener lookup. The
 * input is the datagrams the socket returns, each as a little-endian u16 length and
 * its bytes; after the last, the socket reads end of file. sockdiag.c is compiled in
 * here with recv() answering them; the bytes after a datagram are poisoned (ASan),
 * so reading past a message's end is caught even inside the receive buffer.
 */
#include "fuzz.h"

#include <sanitizer/asan_interface.h>
#include <sys/socket.h>
#include <sys/types.h>

static const uint8_t *in_data;
static size_t in_size, in_at;

static ssize_t fuzz_recv(int fd, void *buf, size_t len, int flags)
{
	uint16_t n;

	(void)fd;
	(void)flags;
	ASAN_UNPOISON_MEMORY_REGION(buf, len);
	if (in_size - in_at < 2)
		return 0;
	memcpy(&n, in_data + in_at, 2);
	in_at += 2;
	if (n > in_size - in_at)
		n = (uint16_t)(in_size - in_at);
	if (n > len)
		n = (uint16_t)len;
	memcpy(buf, in_data + in_at, n);
	in_at += n;
	ASAN_POISON_MEMORY_REGION((char *)buf + n, len - n);
	return n;
}

static ssize_t fuzz_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *a,
			   socklen_t alen)
{
	(void)fd, (void)buf, (void)flags, (void)a, (void)alen;
	return (ssize_t)len;
}

#define recv(fd, buf, len, flags) fuzz_recv(fd, buf, len, flags)
#define sendto(fd, buf, len, flags, a, alen) fuzz_sendto(fd, buf, len, flags, a, alen)
#include "host/sockdiag.c"
#undef recv
#undef sendto

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sockdiag *sd;
	struct sockdiag_counts c;
	unsigned long inodes[16];

	if (!sd && !(sd = sockdiag_open()))
		abort();
	sd->seq = 0; /* the dumps of a run are seq 1 and 2, as the seeds have them */
	in_data = data;
	in_size = size;
	in_at = 0;
	sockdiag_count(sd, 32768, 60999, &c);
	sockdiag_listening_inodes(getpid(), inodes, 16);
	return 0;
}
