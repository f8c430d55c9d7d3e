// Drives Debian's chromium (headless, through playwright-core) for test_pictures.py and
// prints what the page shows as one JSON object on stdout.
//   node pictures_browser.mjs svg FILE.svg SHOT.png SEARCH ZOOM
//     every frame's label and rect geometry; after typing SEARCH into the search box,
//     the highlighted frames and the "Matched" text; after a click on the first frame
//     named ZOOM, its width, and the details line of the first frame still shown over
//     "all"; a screenshot to SHOT.png.
//   node pictures_browser.mjs speedscope URL SHOT.png
//     speedscope's sandwich view of the profile at URL: its table's text rows.
// NODE_PATH names the node_modules with playwright-core (installed by the test).
import { createRequire } from "module";
const require = createRequire(process.env.NODE_PATH + "/");
const { chromium } = require("playwright-core");

const [mode, target, shot, search, zoom] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const out = {};
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  if (mode === "svg") {
    await page.goto("file://" + target);
    const frames = () => page.$$eval("g.f", (gs) => gs.map((g) => {
      const r = g.querySelector("rect");
      return { label: g.querySelector("title").textContent.split("\n")[0],
               title: g.querySelector("title").textContent,
               x: +r.getAttribute("x"), y: +r.getAttribute("y"), width: +r.getAttribute("width"),
               fill: r.getAttribute("fill"), shown: g.style.display !== "none" };
    }));
    out.frames = await frames();
    out.bytes = (await page.content()).length;
    await page.fill("#search", search);
    out.matched = await page.textContent("#matched");
    out.highlighted = (await frames()).filter((f) => f.fill === "#e040e0").map((f) => f.label);
    await page.screenshot({ path: shot });
    await page.fill("#search", "");
    const at = out.frames.findIndex((f) => f.label.startsWith(zoom + " ("));
    await page.locator("g.f").nth(at).click();
    out.zoomed = (await frames()).filter((f) => f.label.startsWith(zoom + " ") && f.shown);
    await page.hover("g.f:visible >> nth=1"); // the zoomed frame's first shown ancestor
    out.details = await page.textContent("#details");
  } else {
    await page.goto(target);
    await page.waitForSelector("text=Symbol Name", { timeout: 30000 });
    await page.waitForTimeout(500);
    out.text = await page.evaluate(() => document.body.innerText);
    await page.screenshot({ path: shot });
  }
  out.errors = errors;
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
