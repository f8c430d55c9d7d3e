#include "sinkopts.h"

#include <stdlib.h>
#include <string.h>

void sinkopts_init(struct sink_opts *o)
{
	if (!o->ch_batch_size)
		o->ch_batch_size = 5000;
	if (o->ch_flush_interval_s <= 0)
		o->ch_flush_interval_s = 30;
	if (!o->ch_queue_max)
		o->ch_queue_max = 100000;
	if (o->profile_window_s <= 0)
		o->profile_window_s = 10;
}

int sinkopts_handle(struct sink_opts *o, int id, char *arg)
{
	if (!o)
		return 0;
	switch (id) {
	case OPT_SQLITE:
		o->sqlite = arg;
		return 1;
	case OPT_CH_URL:
		if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8))
			return opts_usage_error("invalid --clickhouse-url '%s': expected http://HOST:PORT", arg);
		o->ch_url = arg;
		return 1;
	case OPT_CH_USER:
		o->ch_user = arg;
		return 1;
	case OPT_CH_PASSWORD:
		free(o->ch_password);
		if (!(o->ch_password = strdup(arg)))
			return opts_usage_error("out of memory");
		/* what ps shows is the process's own argv memory: blank it */
		memset(arg, 'x', strlen(arg));
		return 1;
	case OPT_CH_PASSWORD_FILE:
		o->ch_password_file = arg;
		return 1;
	case OPT_CH_DATABASE:
		o->ch_database = arg;
		return 1;
	case OPT_CH_CLUSTER:
		o->ch_cluster = arg;
		return 1;
	case OPT_CH_BATCH_SIZE:
		return opts_parse_ulong("ch-batch-size", arg, 1, 1000000, &o->ch_batch_size) ? -1 : 1;
	case OPT_CH_FLUSH_INTERVAL:
		return opts_parse_double("ch-flush-interval", arg, 0.01, 86400, &o->ch_flush_interval_s) ? -1 : 1;
	case OPT_CH_QUEUE_MAX:
		return opts_parse_ulong("ch-queue-max", arg, 1, 100000000, &o->ch_queue_max) ? -1 : 1;
	case OPT_ALSO_STDOUT:
		o->also_stdout = true;
		return 1;
	case OPT_PROFILE_WINDOW:
		return opts_parse_double("profile-window", arg, 0.1, 86400, &o->profile_window_s) ? -1 : 1;
	case OPT_RAW_SAMPLES:
		o->raw_samples = true;
		return 1;
	case OPT_RETAIN_DAYS:
		return opts_parse_ulong("retain-days", arg, 1, 100000, &o->retain_days) ? -1 : 1;
	}
	return 0;
}

bool sinkopts_any_database(const struct sink_opts *o)
{
	return o && (o->sqlite || o->ch_url);
}

long long sinkopts_retain_bound_us(unsigned long days, long long now_us)
{
	const long long day_us = 86400LL * 1000000;

	return (now_us / day_us - (long long)days) * day_us;
}

double sinkopts_retain_interval_s(void)
{
	const char *knob = getenv("PYEBPF_RETAIN_INTERVAL_S");
	double s = knob ? strtod(knob, NULL) : 0;

	return s > 0 ? s : 3600;
}
