/* hostnet's pure parsers: /proc/net/dev, /proc/net/route, ipv6_route, limits, ethtool names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ethtool_stats.h"
#include "fdusage.h"
#include "ifstats.h"
#include "netroute.h"
#include "sockdiag.h"

/* A real /proc/net/dev (kernel 6.18), with a name that is a prefix of another. */
static const char net_dev[] =
	"Inter-|   Receive                                                |  Transmit\n"
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
	"    lo:  123456     789    0    0    0     0          0         0   123456     789    0    0    0     0       0          0\n"
	"  eth0: 98765432101  4567890    3   17    0     0          0       12 1234567890  3456789    5   19    0     0       0          0\n"
	"eth0.100:     1     2    3    4    5     6          7         8        9     10   11   12   13    14      15         16\n";

static void test_ifstats_parse(void **state)
{
	struct ifstats s;

	(void)state;
	assert_int_equal(ifstats_parse(net_dev, "eth0", &s), 0);
	assert_true(s.rx_bytes == 98765432101ull);
	assert_int_equal(s.rx_packets, 4567890);
	assert_int_equal(s.rx_errors, 3);
	assert_int_equal(s.rx_dropped, 17);
	assert_int_equal(s.tx_bytes, 1234567890);
	assert_int_equal(s.tx_packets, 3456789);
	assert_int_equal(s.tx_errors, 5);
	assert_int_equal(s.tx_dropped, 19);
	assert_int_equal(ifstats_parse(net_dev, "eth0.100", &s), 0);
	assert_int_equal(s.rx_bytes, 1);
	assert_int_equal(s.tx_dropped, 12);
	assert_int_equal(ifstats_parse(net_dev, "eth", &s), -ENODEV);
	assert_int_equal(ifstats_parse(net_dev, "face", &s), -ENODEV);
	assert_int_equal(ifstats_parse("  eth0: 1 2 3\n", "eth0", &s), -EINVAL);
}

static void test_ifstats_delta(void **state)
{
	(void)state;
	assert_int_equal(ifstats_delta(10, 25), 15);
	assert_int_equal(ifstats_delta(1000, 7), 7); /* reset: counts from 0 again */
}

static const char route4[] =
	"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	"wlan0\t00000000\t010A000A\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
	"eth1\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
	"down0\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n";

static void test_netroute_ipv4(void **state)
{
	char dev[32] = "";

	(void)state;
	assert_int_equal(netroute_parse_ipv4(route4, dev, sizeof(dev)), 0);
	assert_string_equal(dev, "eth1"); /* lowest metric among the up defaults */
	assert_int_equal(netroute_parse_ipv4("Iface\tDestination\n", dev, sizeof(dev)), -ENOENT);
}

static const char route6[] =
	"fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n"
	"00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n"
	"00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";

static const char route6_none[] =
	"00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000003 00000000 80200001       lo\n"
	"00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";

static void test_netroute_ipv6(void **state)
{
	char dev[32] = "";

	(void)state;
	assert_int_equal(netroute_parse_ipv6(route6, dev, sizeof(dev)), 0);
	assert_string_equal(dev, "eth0");
	/* only the unreachable default on lo: no default route */
	assert_int_equal(netroute_parse_ipv6(route6_none, dev, sizeof(dev)), -ENOENT);
}

static void test_fdusage_limit(void **state)
{
	const char limits[] =
		"Limit                     Soft Limit           Hard Limit           Units     \n"
		"Max cpu time              unlimited            unlimited            seconds   \n"
		"Max open files            1024                 524288               files     \n"
		"Max locked memory         8388608              8388608              bytes     \n";
	const char unlimited[] = "Max open files            unlimited            unlimited            files\n";
	unsigned long soft = 1;

	(void)state;
	assert_int_equal(fdusage_parse_limit(limits, &soft), 0);
	assert_int_equal(soft, 1024);
	assert_int_equal(fdusage_parse_limit(unlimited, &soft), 0);
	assert_int_equal(soft, 0);
	assert_int_equal(fdusage_parse_limit("Max processes 10 10\n", &soft), -EINVAL);
}

static void test_fdusage_names(void **state)
{
	(void)state;
	assert_true(fdusage_name_matches("python", "python3.11"));
	assert_true(fdusage_name_matches("python", "python"));
	assert_true(fdusage_name_matches("gunicorn", "gunicorn: worker"));
	assert_false(fdusage_name_matches("python", "ipython"));
	assert_false(fdusage_name_matches("nginx", "ngin"));
	assert_false(fdusage_name_matches("", "anything"));
}

/* sock_diag's listening sockets of a process: this one, before and after it listens. */
static void test_sockdiag_listener(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(sockdiag_holds_listener(getpid()), 0); /* bound, not listening */
	assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(sockdiag_holds_listener(getpid()), 1);
	close(fd);
	assert_int_equal(sockdiag_holds_listener(getpid()), 0);
	assert_true(sockdiag_listening_inodes(0x7ffffff0, NULL, 0) < 0); /* no such process */
}

static void test_ethtool_match(void **state)
{
	char strings[4][ETH_GSTRING_LEN] = { 0 };
	const char *const names[] = { "bw_in_allowance_exceeded", "pps_allowance_exceeded", "bw_in" };
	int index[3];

	(void)state;
	strcpy(strings[0], "rx_drops");
	strcpy(strings[1], "bw_in_allowance_exceeded_x");
	strcpy(strings[2], "bw_in_allowance_exceeded");
	strcpy(strings[3], "tx_kicks");
	ethtool_stats_match(&strings[0][0], 4, names, 3, index);
	assert_int_equal(index[0], 2); /* exact names only, not prefixes */
	assert_int_equal(index[1], -1);
	assert_int_equal(index[2], -1);
}

/* The ioctl path itself; lo has no driver statistics, which is not an error. */
static void test_ethtool_read_lo(void **state)
{
	const char *const names[] = { "bw_in_allowance_exceeded" };
	uint64_t v = 7;
	bool present = true;

	(void)state;
	assert_int_equal(ethtool_stats_read("lo", names, 1, &v, &present), 0);
	assert_false(present);
	assert_int_equal(v, 0);
	assert_int_equal(ethtool_stats_read("nosuchif0", names, 1, &v, &present), -ENODEV);
	assert_false(present);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ifstats_parse),   cmocka_unit_test(test_ifstats_delta),
		cmocka_unit_test(test_netroute_ipv4),   cmocka_unit_test(test_netroute_ipv6),
		cmocka_unit_test(test_fdusage_limit),   cmocka_unit_test(test_fdusage_names),
		cmocka_unit_test(test_ethtool_match),   cmocka_unit_test(test_ethtool_read_lo),
		cmocka_unit_test(test_sockdiag_listener),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
