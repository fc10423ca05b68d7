//! A row a query returned: owned values, read by column index.

use crate::error::{SqlError, SqlResult};
use crate::value::{FromValue, Value};

/// One row of a query's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    values: Vec<Value>,
}

/// What a column is addressed by (its zero-based index).
pub trait RowIndex {
    /// The index.
    fn index(&self) -> usize;
}

impl RowIndex for usize {
    fn index(&self) -> usize {
        *self
    }
}

impl Row {
    /// A row of `values`, in column order.
    pub fn new(values: Vec<Value>) -> Self {
        Self { values }
    }

    /// The value of column `idx` read as `T`.
    ///
    /// # Errors
    ///
    /// [`SqlError::Conversion`] when there is no such column or its value is not a `T`.
    pub fn get<I: RowIndex, T: FromValue>(&self, idx: I) -> SqlResult<T> {
        let i = idx.index();
        let value = self
            .values
            .get(i)
            .ok_or_else(|| SqlError::conversion(i, format!("no such column (the row has {})", self.values.len())))?;
        T::from_value(value, i)
    }

    /// How many columns the row has.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True for a row of no columns.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The row's values.
    pub fn values(&self) -> &[Value] {
        &self.values
    }
}
