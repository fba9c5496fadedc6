//! A report as a terminal shows it (`report --format table` without `--wide`, the demo's
//! chargeback): the columns that matter, and none that is empty or zero in every row, named
//! under the table. The files, the other formats and `--wide` have every column.

use super::render::{Cell, Report};

/// The chargeback's columns on a terminal, after its key (namespace, team, cost centre or
/// cluster): who, how much GPU time and how well used, the energy, the two prices, the total and
/// the share. `cluster` too where the rows hold more than one.
const CHARGEBACK: [&str; 8] = ["team", "gpu_hours", "avg_util_pct", "energy_kwh", "power_cost", "cloud_cost", "total_cost", "share_pct"];

/// The columns of report `name` a terminal shows (besides the first, the key), or `None` for all.
fn chosen(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "chargeback" => Some(&CHARGEBACK),
        _ => None,
    }
}

impl Cell {
    /// Empty, zero or `no`: a column of only such cells says nothing on a page or a terminal.
    pub fn is_blank(&self) -> bool {
        match self {
            Cell::Null => true,
            Cell::Int(v) => *v == 0,
            Cell::Dec { units, .. } => *units == 0,
            Cell::Str(s) => s.is_empty() || s == "no",
            Cell::Time(_) => false,
        }
    }
}

impl Report {
    /// Indexes of the columns that say something in `rows`: the first (the key) always, the
    /// others unless every row's cell is blank.
    pub fn said_columns(&self, rows: &[&Vec<Cell>]) -> Vec<usize> {
        (0..self.columns.len()).filter(|&i| i == 0 || !rows.iter().all(|row| row.get(i).is_none_or(Cell::is_blank))).collect()
    }

    /// The report narrowed for a terminal: the columns `chosen` for it (every column where none
    /// are) that are not blank in every row, in their order; a note names what was left out and
    /// how to see it. A report with nothing left out is returned as it is.
    pub fn for_terminal(&self) -> Report {
        let rows: Vec<&Vec<Cell>> = self.rows.iter().collect();
        let said = self.said_columns(&rows);
        let distinct = |i: usize| {
            let mut seen: Vec<&Cell> = Vec::new();
            for row in &rows {
                if let Some(c) = row.get(i).filter(|c| !seen.contains(c)) {
                    seen.push(c);
                }
            }
            seen.len()
        };
        let wanted = |i: usize| match chosen(&self.name) {
            None => true,
            Some(list) => i == 0 || list.contains(&self.columns[i].as_str()) || (self.columns[i] == "cluster" && distinct(i) > 1),
        };
        let shown: Vec<usize> = (0..self.columns.len()).filter(|&i| said.contains(&i) && wanted(i)).collect();
        if shown.len() == self.columns.len() {
            return self.clone();
        }
        let pick = |row: &Vec<Cell>| shown.iter().map(|&i| row.get(i).cloned().unwrap_or(Cell::Null)).collect::<Vec<Cell>>();
        let mut notes = self.notes.clone();
        // What was left out: columns with something to say that were not chosen, and blank ones.
        let (more, blank): (Vec<usize>, Vec<usize>) = (0..self.columns.len()).filter(|i| !shown.contains(i)).partition(|i| said.contains(i));
        let names = |idx: &[usize]| idx.iter().map(|&i| self.columns[i].as_str()).collect::<Vec<_>>().join(", ");
        let mut why = Vec::new();
        if !more.is_empty() {
            why.push(format!("not shown here: {}", names(&more)));
        }
        if !blank.is_empty() {
            why.push(format!("empty or zero in every row: {}", names(&blank)));
        }
        notes.push(format!("{} (--wide, the other formats and the files have every column)", capitalised(&why.join("; "))));
        Report {
            name: self.name.clone(),
            title: self.title.clone(),
            columns: shown.iter().map(|&i| self.columns[i].clone()).collect(),
            rows: self.rows.iter().map(pick).collect(),
            total: self.total.as_ref().map(pick),
            notes,
            meta: self.meta.clone(),
        }
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(name: &str, columns: &[&str], rows: Vec<Vec<Cell>>) -> Report {
        Report {
            name: name.into(),
            title: "t".into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows,
            total: None,
            notes: Vec::new(),
            meta: Default::default(),
        }
    }

    #[test]
    fn blank_columns_are_left_out_and_named() {
        let r = report(
            "idle",
            &["pod", "hours", "runs", "flag"],
            vec![
                vec![Cell::Str("a".into()), Cell::Int(3), Cell::Int(0), Cell::Str("no".into())],
                vec![Cell::Str("b".into()), Cell::Null, Cell::Int(0), Cell::Str(String::new())],
            ],
        );
        let t = r.for_terminal();
        assert_eq!(t.columns, ["pod", "hours"]);
        assert_eq!(t.rows[1], [Cell::Str("b".into()), Cell::Null]);
        assert_eq!(t.notes.last().unwrap(), "Empty or zero in every row: runs, flag (--wide, the other formats and the files have every column)");
        let full = report("idle", &["pod", "hours"], vec![vec![Cell::Str("a".into()), Cell::Int(1)]]);
        assert_eq!(full.for_terminal().notes.len(), 0, "nothing left out, nothing said");
    }

    #[test]
    fn the_chargeback_keeps_its_chosen_columns_and_a_cluster_that_varies() {
        let cols = ["namespace", "team", "gpu_hours", "gpu_cost", "total_cost", "cluster"];
        let row =
            |ns: &str, cluster: &str| vec![Cell::Str(ns.into()), Cell::Str("t".into()), Cell::Int(2), Cell::Int(5), Cell::Int(5), Cell::Str(cluster.into())];
        let one = report("chargeback", &cols, vec![row("a", "default"), row("b", "default")]).for_terminal();
        assert_eq!(one.columns, ["namespace", "team", "gpu_hours", "total_cost"]);
        assert!(one.notes[0].starts_with("Not shown here: gpu_cost, cluster"), "{:?}", one.notes);
        let two = report("chargeback", &cols, vec![row("a", "east"), row("a", "west")]).for_terminal();
        assert_eq!(two.columns, ["namespace", "team", "gpu_hours", "total_cost", "cluster"]);
    }
}
