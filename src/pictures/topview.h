/*
 * A live view like top(1) on a terminal: the table redrawn in place, plain ANSI
 * (cursor home, erase to end of line and screen) so it works over ssh and in tmux,
 * on the alternate screen so the shell's screen comes back afterwards. The keyboard
 * is read without echo or line buffering (q quits); Ctrl-C still raises SIGINT, and
 * the terminal is restored on close, at exit and by the runner's shutdown path.
 */
#ifndef PYEBPF_TOPVIEW_H
#define PYEBPF_TOPVIEW_H

#include <stdbool.h>
#include <stddef.h>

struct topview_row {
	double own_pct, total_pct;
	long long own, total;
	const char *name;
};

/* True when stdout is a terminal and the view took it; false: print tables instead. */
bool topview_open(void);
/* One frame: the heading line, then as many rows as the terminal has room for. */
void topview_draw(const char *heading, const struct topview_row *rows, size_t n);
/* A key pressed since the last call, or 0. */
int topview_key(void);
/* Restores the terminal (harmless when it was not taken). */
void topview_close(void);

#endif
