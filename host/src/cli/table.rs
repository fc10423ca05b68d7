//! Plain-text tables for the terminal: columns padded to their widest cell.

/// Renders `rows` under `header`, two spaces between columns, no trailing spaces.
pub(crate) fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// The audit log of a transfer as a table.
pub(crate) fn events(events: &[ahp_store::Event]) -> String {
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            vec![
                e.id.to_string(),
                e.at.to_string(),
                e.kind.to_string(),
                e.detail.to_string(),
            ]
        })
        .collect();
    render(&["#", "at", "event", "detail"], &rows)
}

/// The transfer's model calls as a table (token counts and money; never text).
pub(crate) fn model_calls(calls: &[ahp_store::ModelCall]) -> String {
    if calls.is_empty() {
        return "model calls: none\n".into();
    }
    let rows: Vec<Vec<String>> = calls
        .iter()
        .map(|c| {
            let u = c.usage.unwrap_or_default();
            vec![
                c.id.clone(),
                c.model.clone(),
                c.outcome.clone().unwrap_or_else(|| "in flight".into()),
                format!(
                    "{}/{}/{}/{}",
                    u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens
                ),
                c.reservation.reserved_micro_usd.to_string(),
                c.charged_micro_usd.map_or("-".into(), |n| n.to_string()),
                c.latency_ms.map_or("-".into(), |n| format!("{n} ms")),
            ]
        })
        .collect();
    let mut out = String::new();
    out.push_str(&render(
        &[
            "call",
            "model",
            "outcome",
            "tokens in/cache-read/cache-write/out",
            "reserved µUSD",
            "charged µUSD",
            "latency",
        ],
        &rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn pads_columns_to_the_widest_cell() {
        let out = super::render(&["a", "bb"], &[vec!["long".into(), "x".into()]]);
        assert_eq!(out, "a     bb\nlong  x\n");
    }
}
