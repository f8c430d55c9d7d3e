#include "tracker.h"

#include <stdlib.h>

struct tracker *tracker_new(const struct tracker_ops *ops, const struct common_opts *common)
{
	struct tracker *t = calloc(1, ops->size);

	if (!t)
		return NULL;
	t->ops = ops;
	t->common = common;
	t->poll_ms = 100;
	if (ops->init)
		ops->init(t);
	return t;
}

void tracker_free(struct tracker *t)
{
	if (!t)
		return;
	if (t->ops->destroy)
		t->ops->destroy(t);
	if (t->prog)
		t->ops->bpf->close(t->prog);
	cflags_free(&t->cflags);
	free(t);
}
