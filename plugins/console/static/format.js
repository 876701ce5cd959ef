// Numbers and times for display. Money arrives in USD from the server; RMB uses the rate the
// server reports (billing.rmb_per_usd).

/** Up to 6 decimals (calls cost fractions of a cent), at least 2, no trailing zeros beyond. */
function amount(n) {
  const text = n.toFixed(6).replace(/0+$/, "");
  const [whole, frac = ""] = text.split(".");
  return `${whole}.${frac.padEnd(2, "0")}`;
}

export function usd(value) {
  return `$${amount(Number(value) || 0)}`;
}

export function rmb(valueUsd, rate) {
  return `¥${amount((Number(valueUsd) || 0) * (Number(rate) || 0))}`;
}

export function dateTime(seconds) {
  if (!seconds) return "—";
  const d = new Date(Number(seconds) * 1000);
  return d.toISOString().replace("T", " ").slice(0, 19);
}

export function day(seconds) {
  return seconds ? new Date(Number(seconds) * 1000).toISOString().slice(0, 10) : "";
}

/** "2026-11-23" (a date input, UTC) -> Unix seconds of that day's start; "" stays "". */
export function dayToUnix(text, endOfDay) {
  if (!text) return "";
  const t = Date.parse(`${text}T00:00:00Z`);
  if (Number.isNaN(t)) return "";
  return Math.floor(t / 1000) + (endOfDay ? 86400 : 0);
}

export function orDash(value) {
  return value === null || value === undefined || value === "" ? "—" : String(value);
}
