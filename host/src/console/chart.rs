//! A transfer's budget over time as an SVG line chart, drawn on the server from its spend
//! curve: the budget's opening, then the spend after each `usage_reported` event — downsampled
//! by the store to at most [`CHART_POINTS`] points ([`Store::spend_curve`]), so a long-lived
//! transfer's chart is as cheap to read and as small to send as a new one's.
//!
//! [`Store::spend_curve`]: ahp_store::Store::spend_curve
//!
//! Plain SVG attributes, no inline style or script, so the console's Content-Security-Policy
//! holds; the values are numbers the host computed, never text a guest wrote.

use ahp_store::{SpendSample, Timestamp};
use maud::{Markup, html};

/// Most points the chart draws: about one per two and a half units of its width, more than a
/// screen resolves, and a polyline of a few kilobytes at most.
pub const CHART_POINTS: usize = 240;

/// Width of the chart's drawing area, in SVG user units.
const WIDTH: f64 = 600.0;
/// Height of the chart's drawing area.
const HEIGHT: f64 = 160.0;
/// Margin left of the drawing area (for the axis labels).
const LEFT: f64 = 70.0;
/// Margin above and below the drawing area.
const PAD: f64 = 14.0;

/// Formats micro-USD as dollars with all six decimals (money is exact here).
pub fn usd(micro: u64) -> String {
    format!("${}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

/// The chart: spend as a step line against the allocation as a dashed line, time running left
/// to right from the budget's opening to `now`.
pub fn budget_chart(points: &[SpendSample], allocated_micro_usd: u64, now: Timestamp) -> Markup {
    let top = points
        .iter()
        .map(|p| p.spent_micro_usd)
        .max()
        .unwrap_or(0)
        .max(allocated_micro_usd)
        .max(1) as f64;
    let start = points.first().map_or(now, |p| p.at).as_micros();
    let end = now
        .as_micros()
        .max(points.last().map_or(start, |p| p.at.as_micros()))
        .max(start + 1);
    let x = |t: i64| LEFT + (t - start) as f64 / (end - start) as f64 * WIDTH;
    let y = |v: u64| PAD + HEIGHT - v as f64 / top * HEIGHT;
    let mut line = String::new();
    let mut last = None;
    for p in points {
        if let Some(prev) = last {
            line.push_str(&format!("{:.1},{:.1} ", x(p.at.as_micros()), y(prev)));
        }
        line.push_str(&format!("{:.1},{:.1} ", x(p.at.as_micros()), y(p.spent_micro_usd)));
        last = Some(p.spent_micro_usd);
    }
    if let Some(prev) = last {
        line.push_str(&format!("{:.1},{:.1}", x(end), y(prev)));
    }
    let spent = points.last().map_or(0, |p| p.spent_micro_usd);
    let view = format!("0 0 {} {}", LEFT + WIDTH + PAD, HEIGHT + 2.0 * PAD + 16.0);
    html! {
        svg.chart viewBox=(view) role="img" aria-labelledby="chart-title" data-points=(points.len()) {
            title #chart-title { "Spend " (usd(spent)) " of " (usd(allocated_micro_usd)) " over time" }
            line.axis x1=(LEFT) y1=(PAD) x2=(LEFT) y2=(PAD + HEIGHT) {}
            line.axis x1=(LEFT) y1=(PAD + HEIGHT) x2=(LEFT + WIDTH) y2=(PAD + HEIGHT) {}
            line.allocation x1=(LEFT) y1=(format!("{:.1}", y(allocated_micro_usd)))
                x2=(LEFT + WIDTH) y2=(format!("{:.1}", y(allocated_micro_usd))) {}
            text.label x="2" y=(format!("{:.1}", y(allocated_micro_usd) + 4.0)) { (usd(allocated_micro_usd)) }
            text.label x="2" y=(PAD + HEIGHT + 4.0) { "$0" }
            @if points.is_empty() {
                text.label x=(LEFT + 10.0) y=(PAD + HEIGHT - 8.0) { "no budget yet" }
            } @else {
                polyline.spend points=(line.trim_end()) {}
            }
            text.label x=(LEFT) y=(HEIGHT + 2.0 * PAD + 12.0) { (Timestamp::from_micros(start).to_string().get(11..19).unwrap_or("")) }
            text.label.end x=(LEFT + WIDTH) y=(HEIGHT + 2.0 * PAD + 12.0) { "now" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(at: i64, spent: u64) -> SpendSample {
        SpendSample {
            at: Timestamp::from_micros(at),
            spent_micro_usd: spent,
        }
    }

    fn polyline(svg: &str) -> &str {
        svg.split(r#"class="spend" points=""#)
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
    }

    #[test]
    fn the_curve_steps_through_each_point() {
        let points = [point(10, 0), point(20, 300), point(30, 700)];
        let svg = budget_chart(&points, 1000, Timestamp::from_micros(40)).into_string();
        assert!(svg.contains(r#"data-points="3""#), "{svg}");
        // Steps: each report adds a horizontal then a vertical segment, plus the tail to now.
        let line = polyline(&svg);
        assert_eq!(line.split(' ').count(), 1 + 2 + 2 + 1, "{line}");
        assert!(svg.contains("$0.000700 of $0.001000"));
    }

    #[test]
    fn a_chart_at_its_bound_stays_small() {
        let points: Vec<SpendSample> = (0..CHART_POINTS as i64).map(|i| point(i * 1_000, i as u64)).collect();
        let svg = budget_chart(&points, 1_000_000, Timestamp::from_micros(1_000_000_000)).into_string();
        assert_eq!(polyline(&svg).split(' ').count(), 2 * CHART_POINTS);
        assert!(svg.len() < 16 * 1024, "{} bytes", svg.len());
    }

    #[test]
    fn an_unprovisioned_transfer_draws_an_empty_chart() {
        let svg = budget_chart(&[], 0, Timestamp::from_micros(5)).into_string();
        assert!(svg.contains("no budget yet") && !svg.contains("polyline"));
    }

    #[test]
    fn money_is_shown_exactly() {
        assert_eq!(usd(0), "$0.000000");
        assert_eq!(usd(1_234_567), "$1.234567");
    }
}
