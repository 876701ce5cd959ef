// Small SVG charts of our own: vertical bars over time, horizontal bars by name. They scale to
// their container (viewBox), label their axes, give every bar a <title> tooltip, carry their
// title as their accessible name, and come with the same numbers as a table (under a disclosure)
// for anyone who cannot see the drawing.

import { h, s } from "./dom.js";

/** The figure: caption, drawing and its numbers as a table. */
function figure(title, svg, points, format) {
  const data = h("details", { class: "chart-table" },
    h("summary", {}, "Show as a table"),
    h("table", {},
      h("caption", { class: "sr-only" }, title),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Label"), h("th", { scope: "col", class: "num" }, "Value"))),
      h("tbody", {}, points.map((p) => h("tr", {}, h("th", { scope: "row" }, p.label), h("td", { class: "num" }, format(p.value)))))));
  return h("figure", { class: "chart-box" }, h("figcaption", {}, title), svg, data);
}

function niceMax(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * power >= value) return step * power;
  }
  return 10 * power;
}

/** points: [{label, value}]; title: what the chart shows (its name); format(value) -> text for
 * the axis and tooltips. */
export function barChart(points, { title, format, height = 180 } = {}) {
  const width = 640;
  const pad = { left: 64, right: 8, top: 12, bottom: 28 };
  const max = niceMax(Math.max(0, ...points.map((p) => p.value)));
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const slot = plotW / Math.max(points.length, 1);
  const svg = s("svg", {
    viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": title,
  });
  for (const fraction of [0, 0.5, 1]) {
    const y = pad.top + plotH * (1 - fraction);
    svg.append(
      s("line", { x1: pad.left, x2: width - pad.right, y1: y, y2: y, class: "grid" }),
      s("text", { x: pad.left - 6, y: y + 4, class: "axis", "text-anchor": "end" }, format(max * fraction)),
    );
  }
  points.forEach((point, i) => {
    const barH = max > 0 ? (plotH * point.value) / max : 0;
    const x = pad.left + i * slot + slot * 0.15;
    const bar = s("rect", {
      x, y: pad.top + plotH - barH, width: Math.max(slot * 0.7, 1), height: Math.max(barH, 0),
      class: point.value > 0 ? "bar" : "bar empty", "data-value": point.value,
    }, s("title", {}, `${point.label}: ${format(point.value)}`));
    svg.append(bar);
    const every = Math.ceil(points.length / 6);
    if (i % every === 0 || i === points.length - 1) {
      svg.append(s("text", { x: x + slot * 0.35, y: height - 8, class: "axis", "text-anchor": "middle" },
        point.label));
    }
  });
  return figure(title, svg, points, format);
}

/** rows: [{label, value}] drawn as labelled horizontal bars. */
export function hbarChart(rows, { title, format } = {}) {
  const width = 640;
  const rowH = 26;
  const labelW = 200;
  const height = Math.max(rows.length, 1) * rowH + 8;
  const max = Math.max(0, ...rows.map((r) => r.value)) || 1;
  const svg = s("svg", {
    viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": title,
  });
  if (!rows.length) {
    svg.append(s("text", { x: 8, y: 20, class: "axis" }, "No spending yet"));
  }
  rows.forEach((row, i) => {
    const y = 4 + i * rowH;
    const barW = ((width - labelW - 90) * row.value) / max;
    svg.append(
      s("text", { x: labelW - 8, y: y + 17, class: "label", "text-anchor": "end" }, row.label),
      s("rect", { x: labelW, y: y + 4, width: Math.max(barW, 1), height: rowH - 8, class: "bar" },
        s("title", {}, `${row.label}: ${format(row.value)}`)),
      s("text", { x: labelW + Math.max(barW, 1) + 6, y: y + 17, class: "axis" }, format(row.value)),
    );
  });
  return figure(title, svg, rows, format);
}
