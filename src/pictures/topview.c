#include "topview.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static bool taken, keys;
static struct termios saved;

void topview_close(void)
{
	if (!taken)
		return;
	taken = false;
	if (keys)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
	/* cursor shown, the main screen back */
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
}

bool topview_open(void)
{
	struct termios raw;

	if (!isatty(STDOUT_FILENO))
		return false;
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* ISIG stays: Ctrl-C is SIGINT */
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		keys = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
	}
	taken = true;
	atexit(topview_close);
	fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
	fflush(stdout);
	return true;
}

int topview_key(void)
{
	unsigned char c;

	return keys && taken && read(STDIN_FILENO, &c, 1) == 1 ? c : 0;
}

void topview_draw(const char *heading, const struct topview_row *rows, size_t n)
{
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	size_t room;
	int cols;

	if (!taken)
		return;
	ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	cols = ws.ws_col > 20 ? ws.ws_col : 80;
	room = ws.ws_row > 4 ? (size_t)ws.ws_row - 3 : 1;
	printf("\033[H%.*s\033[K\n\033[7m%-*.*s\033[0m\n", cols, heading, cols, cols,
	       "  %OWN  %TOTAL      OWN    TOTAL  FUNCTION (FILE:LINE)");
	for (size_t i = 0; i < n && i < room; i++)
		printf("%6.2f%% %6.2f%% %8lld %8lld  %.*s\033[K\n", rows[i].own_pct, rows[i].total_pct, rows[i].own,
		       rows[i].total, cols > 38 ? cols - 38 : 0, rows[i].name);
	fputs("\033[J", stdout);
	fflush(stdout);
}
