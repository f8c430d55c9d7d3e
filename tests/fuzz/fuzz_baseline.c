/*
 * pystack --baseline FILE (src/pictures/profdiff.c profdiff_read and the loaders of
 * profload.h): any file a user may name, read as it would be: a pprof profile when it
 * is gzip, a speedscope file when it is a JSON object, else folded text. Random bytes
 * rarely make a valid gzip stream, so an input beginning with 'P' is the rest as
 * pprof's protobuf, gzipped here: mutation then reaches protobuf-c's unpack and
 * pprof_load.c's checks of ids and indices.
 */
#include "fuzz.h"

#include <jansson.h>
#include <zlib.h>

#include "profdiff.h"
#include "stackagg.h"

/* data gzipped into buf (of size cap); its length, or 0. */
static size_t gzip(const uint8_t *data, size_t size, uint8_t *buf, size_t cap)
{
	z_stream z = { 0 };
	size_t n = 0;

	if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return 0;
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)size;
	z.next_out = buf;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) == Z_STREAM_END)
		n = z.total_out;
	deflateEnd(&z);
	return n;
}

/* jansson seeds its hash tables from /dev/urandom: a fixed seed keeps fuzz-check's runs the same */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	json_object_seed(1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stackagg a;
	const char *path;

	if (size > (1 << 20))
		return 0;
	stackagg_init(&a);
	if (size && data[0] == 'P') {
		size_t cap = size + size / 8 + 64, n = 0;
		uint8_t *buf = malloc(cap);
		if (buf && (n = gzip(data + 1, size - 1, buf, cap)) && (path = fuzz_file(buf, n)))
			profdiff_read(path, &a);
		free(buf);
	} else if ((path = fuzz_file(data, size))) {
		profdiff_read(path, &a);
	}
	stackagg_free(&a);
	return 0;
}
