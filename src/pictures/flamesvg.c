/*
 * The flame graph: one SVG file with its script inside (no network, nothing to
 * install). The stacks merge into a tree of call paths, root at the bottom, children
 * in name order; each node is a <g class="f"> with a <title> (the tooltip: frame,
 * value, percent), a <rect> whose width is its share of the whole and a <text>.
 * The script zooms on a click, searches (a regular expression over the frames, the
 * matches in magenta and their share) and shows the frame under the pointer at the
 * bottom. Nodes narrower than MIN_WIDTH pixels are left out, as FlameGraph does
 * (its limit is 0.1): they cannot be seen or clicked, and 10,000 equally frequent
 * stacks would otherwise make a 12 MB file that a browser opens slowly. Zooming does
 * not bring them back; speedscope and pprof files keep every stack.
 *
 * The differential flame graph (flamesvg_write_diff) is the same picture of the after
 * profile, each node's colour the change of its share of all samples against the
 * baseline's same call path: red grew, blue shrank, the deeper the more (full at the
 * largest change drawn); its tooltip says both shares and the difference. Call paths
 * of the baseline that the after profile lacks are listed below the graph.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "profdata.h"
#include "profwrite.h"
#include "stackagg.h"

enum { WIDTH = 1200, PAD = 10, FRAME_H = 16, TOP = 60, BOTTOM = 34, CHAR_W = 7 };
#define MIN_WIDTH 0.5

struct node {
	unsigned frame;          /* index in d->frames; the root "all" has none */
	long long value, count;
	long long base;          /* the baseline's value of the same call path */
	unsigned child, sibling; /* 0: none (node 0 is the root, never anyone's child) */
};

struct tree {
	struct node *v;
	size_t n, cap;
	int depth; /* of the deepest node, the root being 0 */
};

static long add_node(struct tree *t, unsigned frame)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct node *v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return -1;
		t->v = v, t->cap = cap;
	}
	memset(&t->v[t->n], 0, sizeof(t->v[0]));
	t->v[t->n].frame = frame;
	return (long)t->n++;
}

static int build(struct tree *t, const struct profdata *d)
{
	if (add_node(t, 0) < 0)
		return -1;
	for (size_t i = 0; i < d->nstacks; i++) {
		const struct pstack *s = &d->stacks[i];
		long long value = profdata_value(d, s);
		size_t cur = 0;

		t->v[0].value += value, t->v[0].count += s->count;
		for (int k = 0; k < s->depth; k++) {
			unsigned c = t->v[cur].child;
			while (c && t->v[c].frame != s->frames[k])
				c = t->v[c].sibling;
			if (!c) {
				long n = add_node(t, s->frames[k]);
				if (n < 0)
					return -1;
				c = (unsigned)n;
				t->v[c].sibling = t->v[cur].child;
				t->v[cur].child = c;
			}
			t->v[c].value += value, t->v[c].count += s->count;
			cur = c;
			if (k + 1 > t->depth)
				t->depth = k + 1;
		}
	}
	return 0;
}

/* The child of node cur whose frame's text is text, or 0. */
static unsigned child_of(const struct tree *t, const struct profdata *d, size_t cur, const char *text)
{
	unsigned c = t->v[cur].child;

	while (c && strcmp(d->frames[t->v[c].frame].text, text))
		c = t->v[c].sibling;
	return c;
}

/*
 * The baseline's values on the after tree's nodes of the same call paths; what the
 * after tree lacks goes to gone, keyed by the call path down to its first frame missing.
 */
static int add_base(struct tree *t, const struct profdata *d, const struct profdata *b, struct stackagg *gone)
{
	for (size_t i = 0; i < b->nstacks; i++) {
		const struct pstack *s = &b->stacks[i];
		long long value = profdata_value(b, s);
		size_t cur = 0, len = 0;
		char path[2048];

		t->v[0].base += value;
		for (int k = 0; k < s->depth; k++) {
			const char *text = b->frames[s->frames[k]].text;
			unsigned c = child_of(t, d, cur, text);
			int n = snprintf(path + len, sizeof(path) - len, "%s%s", k ? ";" : "", text);

			len = n < 0 || (size_t)n >= sizeof(path) - len ? sizeof(path) - 1 : len + (size_t)n;
			if (!c) {
				struct stackagg_entry *e = stackagg_get(gone, path, len);
				if (!e)
					return -1;
				e->self += value;
				break;
			}
			t->v[c].base += value;
			cur = c;
		}
	}
	return 0;
}

static void put_escaped(FILE *f, const char *s, size_t max)
{
	for (size_t i = 0; s[i] && i < max; i++) {
		switch (s[i]) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(s[i], f);
		}
	}
}

static unsigned hash_of(const char *s)
{
	unsigned h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

enum origin { ORIGIN_USER, ORIGIN_LIBRARY, ORIGIN_STDLIB, ORIGIN_OTHER };

/*
 * Whose code a frame is: installed packages (site-packages, dist-packages), the
 * standard library (under a lib/pythonX.Y directory, or frozen/built-in "<...>"
 * modules), else the user's.
 */
static enum origin origin_of(const struct pframe *fr)
{
	if (fr->kind != PFRAME_CODE || !fr->file[0])
		return ORIGIN_OTHER;
	if (strstr(fr->file, "/site-packages/") || strstr(fr->file, "/dist-packages/"))
		return ORIGIN_LIBRARY;
	if (fr->file[0] == '<' || strstr(fr->file, "/lib/python"))
		return ORIGIN_STDLIB;
	return ORIGIN_USER;
}

/* Warm for the user's code, green for libraries, pale blue for the stdlib; the file picks the shade. */
static void colour(const struct pframe *fr, char out[8])
{
	unsigned h = hash_of(fr->file[0] ? fr->file : fr->name);
	int r, g, b;

	switch (origin_of(fr)) {
	case ORIGIN_USER:
		r = 225 + (int)(h % 30), g = 80 + (int)(h / 30 % 120), b = 40 + (int)(h / 3600 % 30);
		break;
	case ORIGIN_LIBRARY:
		r = 80 + (int)(h % 60), g = 175 + (int)(h / 60 % 50), b = 80 + (int)(h / 3000 % 40);
		break;
	case ORIGIN_STDLIB:
		r = 140 + (int)(h % 40), g = 170 + (int)(h / 40 % 30), b = 215 + (int)(h / 1200 % 30);
		break;
	default:
		r = g = b = fr->kind == PFRAME_THREAD ? 190 : 215;
	}
	snprintf(out, 8, "#%02x%02x%02x", r, g, b);
}

struct svg {
	FILE *f;
	const struct profdata *d;
	const struct profdata *base; /* a differential picture: the baseline, else NULL */
	struct tree t;
	double scale; /* pixels per unit of value */
	int height;
	int graph_bottom;  /* the y under the root's frame */
	double max_change; /* the largest change of a share drawn, in points */
};

/* A node's share of all samples in percent: after, and before in the baseline. */
static double share_after(const struct svg *s, const struct node *n)
{
	return s->t.v[0].value ? 100.0 * (double)n->value / (double)s->t.v[0].value : 0;
}

static double share_before(const struct svg *s, const struct node *n)
{
	return s->t.v[0].base ? 100.0 * (double)n->base / (double)s->t.v[0].base : 0;
}

/* Red when the share grew, blue when it shrank, the paler the smaller against the largest change. */
static void diff_colour(const struct svg *s, const struct node *n, char out[8])
{
	double change = share_after(s, n) - share_before(s, n);
	double k = s->max_change > 0 ? (change < 0 ? -change : change) / s->max_change : 0;
	int pale = 235 - (int)(k * 185);

	if (change > 0)
		snprintf(out, 8, "#%02x%02x%02x", 255, pale, pale);
	else if (change < 0)
		snprintf(out, 8, "#%02x%02x%02x", pale, pale, 255);
	else
		snprintf(out, 8, "#%02x%02x%02x", 235, 235, 235);
}

static void put_value(struct svg *s, const struct node *n)
{
	const struct profile_meta *m = s->d->meta;
	double pct = share_after(s, n);

	if (s->base)
		fprintf(s->f, "before %.2f%%, after %.2f%%, difference %+.2f points", share_before(s, n), pct,
			pct - share_before(s, n));
	else if (m->by_weight)
		fprintf(s->f, "%.3f ms %s in %lld %s (%.2f%%)", (double)n->value / 1e6, m->weight_name,
			n->count, m->count_name, pct);
	else
		fprintf(s->f, "%lld %s (%.2f%%)", n->count, m->count_name, pct);
}

static int by_name(const void *a, const void *b, void *ctx)
{
	const struct svg *s = ctx;
	const struct node *x = &s->t.v[*(const unsigned *)a], *y = &s->t.v[*(const unsigned *)b];

	return strcmp(s->d->frames[x->frame].text, s->d->frames[y->frame].text);
}

static int put_node(struct svg *s, unsigned i, long long offset, int depth)
{
	const struct node *n = &s->t.v[i];
	const struct pframe *fr = i ? &s->d->frames[n->frame] : NULL;
	const char *text = fr ? fr->text : "all";
	double x = PAD + (double)offset * s->scale, w = (double)n->value * s->scale;
	int y = s->graph_bottom - (depth + 1) * FRAME_H;
	size_t nchild = 0, fit = w > 3 * CHAR_W ? (size_t)((w - 6) / CHAR_W) : 0;
	unsigned *kids;
	char fill[8] = "#d0d0d0";

	if (w < MIN_WIDTH)
		return 0;
	if (s->base)
		diff_colour(s, n, fill);
	else if (fr)
		colour(fr, fill);
	fputs("<g class=\"f\"><title>", s->f);
	put_escaped(s->f, text, (size_t)-1);
	fputc('\n', s->f);
	put_value(s, n);
	fprintf(s->f, "</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>"
		"<text x=\"%.2f\" y=\"%d\">", x, y, w, FRAME_H - 1, fill, x + 3, y + FRAME_H - 4);
	if (fit)
		put_escaped(s->f, text, strlen(text) <= fit ? fit : fit - 2);
	fputs(fit && strlen(text) > fit ? "..</text></g>\n" : "</text></g>\n", s->f);

	for (unsigned c = n->child; c; c = s->t.v[c].sibling)
		nchild++;
	if (!nchild)
		return 0;
	kids = malloc(nchild * sizeof(*kids));
	if (!kids)
		return -1;
	nchild = 0;
	for (unsigned c = n->child; c; c = s->t.v[c].sibling)
		kids[nchild++] = c;
	qsort_r(kids, nchild, sizeof(*kids), by_name, s);
	for (size_t k = 0; k < nchild; k++) {
		if (put_node(s, kids[k], offset, depth + 1)) {
			free(kids);
			return -1;
		}
		offset += s->t.v[kids[k]].value;
	}
	free(kids);
	return 0;
}

/* Zoom, search, details: the frames' layout is read back from the rects. */
static const char script[] =
	"var W=" "1200" ",PAD=10,CW=7,gs=[],details,matched,zoomed=null;\n"
	"function init(){details=document.getElementById('details');matched=document.getElementById('matched');\n"
	" var all=document.querySelectorAll('g.f');\n"
	" for(var i=0;i<all.length;i++){var g=all[i],r=g.querySelector('rect'),t=g.querySelector('title').textContent;\n"
	"  g.x0=+r.getAttribute('x');g.w0=+r.getAttribute('width');g.y0=+r.getAttribute('y');\n"
	"  g.fill0=r.getAttribute('fill');g.label=t.split('\\n')[0];g.info=t.replace('\\n',': ');gs.push(g);\n"
	"  g.onclick=function(){zoom(this)};\n"
	"  g.onmouseover=function(){details.textContent=this.info};g.onmouseout=function(){details.textContent=' '}}\n"
	" document.getElementById('reset').onclick=function(){zoom(null)};\n"
	" var box=document.getElementById('search');box.oninput=function(){search(box.value)};\n"
	" document.onkeydown=function(e){if((e.ctrlKey&&e.key=='f')||e.key=='/'){e.preventDefault();box.focus()}\n"
	"  else if(e.key=='Escape'){box.value='';search('')}}}\n"
	"function place(g,x,w){var r=g.querySelector('rect'),t=g.querySelector('text');\n"
	" r.setAttribute('x',x.toFixed(2));r.setAttribute('width',w.toFixed(2));t.setAttribute('x',(x+3).toFixed(2));\n"
	" var n=Math.floor((w-6)/CW);t.textContent=w<3*CW?'':g.label.length<=n?g.label:g.label.slice(0,n-2)+'..'}\n"
	"function zoom(z){zoomed=z;var x=z?z.x0:PAD,w=z?z.w0:W-2*PAD,s=(W-2*PAD)/w,e=0.01;\n"
	" for(var i=0;i<gs.length;i++){var g=gs[i];\n"
	"  if(!z){g.style.display='';g.classList.remove('parent');place(g,g.x0,g.w0);continue}\n"
	"  if(g.y0>z.y0&&g.x0<=x+e&&g.x0+g.w0>=x+w-e){g.style.display='';g.classList.add('parent');place(g,PAD,W-2*PAD)}\n"
	"  else if(g.y0<=z.y0&&g.x0>=x-e&&g.x0+g.w0<=x+w+e){g.style.display='';g.classList.remove('parent');place(g,PAD+(g.x0-x)*s,g.w0*s)}\n"
	"  else g.style.display='none'}}\n"
	"function search(q){var re=null,spans=[],sum=0,end=-1;\n"
	" if(q){try{re=new RegExp(q)}catch(err){re=new RegExp(q.replace(/[.*+?^${}()|[\\]\\\\]/g,'\\\\$&'))}}\n"
	" for(var i=0;i<gs.length;i++){var g=gs[i],r=g.querySelector('rect'),hit=re&&re.test(g.label);\n"
	"  r.setAttribute('fill',hit?'#e040e0':g.fill0);g.classList.toggle('match',!!hit);if(hit)spans.push([g.x0,g.x0+g.w0])}\n"
	" spans.sort(function(a,b){return a[0]-b[0]});\n"
	" for(var k=0;k<spans.length;k++){if(spans[k][0]>=end){sum+=spans[k][1]-spans[k][0];end=spans[k][1]}\n"
	"  else if(spans[k][1]>end){sum+=spans[k][1]-end;end=spans[k][1]}}\n"
	" matched.textContent=re?'Matched: '+(100*sum/(W-2*PAD)).toFixed(2)+'%':' '}\n";

struct key {
	const char *what, *fill;
};

static void put_legend(struct svg *s)
{
	static const struct key keys[] = { { "your code", "#f0a050" }, { "installed packages", "#70c070" },
					   { "standard library", "#a0b8e8" } },
				diff_keys[] = { { "share grew", "#ff3232" }, { "share shrank", "#3232ff" },
						{ "unchanged", "#ebebeb" } };
	const struct key *k = s->base ? diff_keys : keys;
	int x = PAD;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		fprintf(s->f, "<rect x=\"%d\" y=\"36\" width=\"12\" height=\"12\" fill=\"%s\"/>"
			"<text x=\"%d\" y=\"46\">%s</text>\n", x, k[i].fill, x + 16, k[i].what);
		x += 24 + CHAR_W * (int)strlen(k[i].what);
	}
}

/* The largest change of a share among the nodes wide enough to be drawn. */
static double max_change(const struct svg *s)
{
	double max = 0;

	for (size_t i = 1; i < s->t.n; i++) {
		const struct node *n = &s->t.v[i];
		double c = share_after(s, n) - share_before(s, n);
		if ((double)n->value * s->scale >= MIN_WIDTH && (c < 0 ? -c : c) > max)
			max = c < 0 ? -c : c;
	}
	return max;
}

enum { MAX_GONE = 20 };

/* The call paths only in the baseline, most samples first, below the graph (their text left-cut to fit). */
static void put_gone(struct svg *s, const struct stackagg *gone)
{
	const struct stackagg_entry **v = stackagg_sorted(gone);
	size_t fit = (WIDTH - 2 * PAD) / CHAR_W - 20;
	int y = s->graph_bottom + 8 + FRAME_H;

	if (!v)
		return;
	fprintf(s->f, "<g id=\"gone\"><text x=\"%d\" y=\"%d\">Only in the baseline (its share before):</text>\n", PAD, y);
	for (size_t i = 0; i < gone->n && i < MAX_GONE; i++) {
		const char *text = v[i]->key;
		size_t len = strlen(text);

		y += FRAME_H;
		fprintf(s->f, "<text class=\"gone\" x=\"%d\" y=\"%d\">%.2f%%  %s", PAD, y,
			s->t.v[0].base ? 100.0 * (double)v[i]->self / (double)s->t.v[0].base : 0, len > fit ? ".." : "");
		put_escaped(s->f, len > fit ? text + len - fit : text, (size_t)-1);
		fputs("</text>\n", s->f);
	}
	if (gone->n > MAX_GONE)
		fprintf(s->f, "<text x=\"%d\" y=\"%d\">and %zu more</text>\n", PAD, y + FRAME_H, gone->n - MAX_GONE);
	fputs("</g>\n", s->f);
	free(v);
}

static int write_svg(FILE *f, const struct profdata *d, const struct profdata *base)
{
	struct svg s = { .f = f, .d = d, .base = base };
	const struct profile_meta *m = d->meta;
	struct stackagg gone;
	int r, list = 0;

	stackagg_init(&gone);
	if (build(&s.t, d) || (base && add_base(&s.t, d, base, &gone))) {
		free(s.t.v);
		stackagg_free(&gone);
		return -1;
	}
	if (gone.n)
		list = 2 + (int)(gone.n < MAX_GONE ? gone.n : MAX_GONE + 1);
	s.height = TOP + (s.t.depth + 1) * FRAME_H + BOTTOM + list * FRAME_H;
	s.graph_bottom = s.height - BOTTOM - list * FRAME_H;
	s.scale = s.t.v[0].value ? (double)(WIDTH - 2 * PAD) / (double)s.t.v[0].value : 0;
	s.max_change = base ? max_change(&s) : 0;
	fprintf(f, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"xmlns=\"http://www.w3.org/2000/svg\" onload=\"init()\">\n"
		"<style>text{font:12px Verdana,sans-serif;fill:#000}g.f{cursor:pointer}g.f text{pointer-events:none}"
		"g.f:hover rect{stroke:#000;stroke-width:0.5}g.parent{opacity:0.6}#title{font-size:17px;text-anchor:middle}"
		"#reset{cursor:pointer;fill:#06c}#matched{text-anchor:end}</style>\n"
		"<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n"
		"<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f8f8f4\"/>\n<text id=\"title\" x=\"%d\" y=\"22\">",
		WIDTH, s.height, WIDTH, s.height, script, WIDTH, s.height, WIDTH / 2);
	put_escaped(f, m->title ? m->title : "Flame graph", (size_t)-1);
	if (m->by_weight)
		fprintf(f, ": %.3f ms %s in %lld %s", (double)s.t.v[0].value / 1e6, m->weight_name, s.t.v[0].count,
			m->count_name);
	else
		fprintf(f, ": %lld %s", s.t.v[0].count, m->count_name);
	if (base)
		fprintf(f, ", against %lld in the baseline", base->count);
	fprintf(f, "</text>\n<text id=\"reset\" x=\"%d\" y=\"22\">Reset zoom</text>\n", PAD);
	put_legend(&s);
	fprintf(f, "<foreignObject x=\"%d\" y=\"30\" width=\"260\" height=\"24\">"
		"<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"search\" type=\"search\" "
		"placeholder=\"search (regular expression)\" style=\"width:250px\"/></foreignObject>\n"
		"<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n<text id=\"matched\" x=\"%d\" y=\"%d\"> </text>\n"
		"<g id=\"frames\">\n", WIDTH - PAD - 260, PAD, s.height - 12, WIDTH - PAD, s.height - 12);
	r = put_node(&s, 0, 0, 0);
	fputs("</g>\n", f);
	if (gone.n)
		put_gone(&s, &gone);
	fputs("</svg>\n", f);
	free(s.t.v);
	stackagg_free(&gone);
	return r || ferror(f) ? -1 : 0;
}

int flamesvg_write(FILE *f, const struct profdata *d)
{
	return write_svg(f, d, NULL);
}

int flamesvg_write_diff(FILE *f, const struct profdata *after, const struct profdata *before)
{
	return write_svg(f, after, before);
}
