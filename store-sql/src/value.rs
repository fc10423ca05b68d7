//! Values bound to statements and read from rows: the four storage classes both databases
//! share (integer, text, blob, null).

use crate::error::{SqlError, SqlResult};

/// An owned column value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// SQL `NULL`.
    Null,
    /// A 64-bit signed integer (booleans are stored as 0 and 1).
    Integer(i64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// A borrowed value, as bound to a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// SQL `NULL`.
    Null,
    /// A 64-bit signed integer.
    Integer(i64),
    /// UTF-8 text.
    Text(&'a str),
    /// Bytes.
    Blob(&'a [u8]),
}

impl Value {
    /// This value, borrowed.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Self::Null => ValueRef::Null,
            Self::Integer(i) => ValueRef::Integer(*i),
            Self::Text(s) => ValueRef::Text(s),
            Self::Blob(b) => ValueRef::Blob(b),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Integer(_) => "integer",
            Self::Text(_) => "text",
            Self::Blob(_) => "blob",
        }
    }
}

impl ValueRef<'_> {
    /// This value, owned.
    pub fn to_owned(self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Integer(i) => Value::Integer(i),
            Self::Text(s) => Value::Text(s.to_owned()),
            Self::Blob(b) => Value::Blob(b.to_owned()),
        }
    }
}

/// A Rust value that binds as a statement parameter.
pub trait ToValue {
    /// The value to bind.
    fn to_value(&self) -> ValueRef<'_>;
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> ValueRef<'_> {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> ValueRef<'_> {
        self.as_ref().map_or(ValueRef::Null, ToValue::to_value)
    }
}

impl ToValue for Value {
    fn to_value(&self) -> ValueRef<'_> {
        self.as_ref()
    }
}

impl ToValue for ValueRef<'_> {
    fn to_value(&self) -> ValueRef<'_> {
        *self
    }
}

impl ToValue for str {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl ToValue for String {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl<const N: usize> ToValue for [u8; N] {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl ToValue for bool {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Integer(i64::from(*self))
    }
}

macro_rules! integer_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> ValueRef<'_> {
                ValueRef::Integer(i64::from(*self))
            }
        }
    )*};
}
integer_to_value!(i64, i32, i16, i8, u32, u16, u8);

/// A Rust value a column reads as.
pub trait FromValue: Sized {
    /// Reads `value`, found in column `column`.
    ///
    /// # Errors
    ///
    /// [`SqlError::Conversion`] when the value has another type or is out of range.
    fn from_value(value: &Value, column: usize) -> SqlResult<Self>;
}

fn mismatch(value: &Value, column: usize, wanted: &str) -> SqlError {
    SqlError::conversion(column, format!("expected {wanted}, found {}", value.kind()))
}

impl FromValue for Value {
    fn from_value(value: &Value, _: usize) -> SqlResult<Self> {
        Ok(value.clone())
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: &Value, column: usize) -> SqlResult<Self> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other, column).map(Some),
        }
    }
}

impl FromValue for String {
    fn from_value(value: &Value, column: usize) -> SqlResult<Self> {
        match value {
            Value::Text(s) => Ok(s.clone()),
            other => Err(mismatch(other, column, "text")),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: &Value, column: usize) -> SqlResult<Self> {
        match value {
            Value::Blob(b) => Ok(b.clone()),
            other => Err(mismatch(other, column, "blob")),
        }
    }
}

impl FromValue for bool {
    fn from_value(value: &Value, column: usize) -> SqlResult<Self> {
        match value {
            Value::Integer(i) => Ok(*i != 0),
            other => Err(mismatch(other, column, "integer")),
        }
    }
}

macro_rules! integer_from_value {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: &Value, column: usize) -> SqlResult<Self> {
                match value {
                    Value::Integer(i) => <$t>::try_from(*i).map_err(|_| {
                        SqlError::conversion(column, format!("{i} is out of range for {}", stringify!($t)))
                    }),
                    other => Err(mismatch(other, column, "integer")),
                }
            }
        }
    )*};
}
integer_from_value!(i64, i32, u64, u32, u16, u8, usize);

/// The parameters of one statement: a tuple of [`ToValue`]s (up to 16), an array or slice of
/// them, or `[]` for none.
pub trait Params {
    /// The values, in placeholder order (`?1` first).
    fn values(&self) -> Vec<ValueRef<'_>>;
}

impl Params for [&dyn ToValue; 0] {
    fn values(&self) -> Vec<ValueRef<'_>> {
        Vec::new()
    }
}

macro_rules! array_params {
    ($($n:literal),*) => {$(
        impl<T: ToValue> Params for [T; $n] {
            fn values(&self) -> Vec<ValueRef<'_>> {
                self.iter().map(ToValue::to_value).collect()
            }
        }
    )*};
}
array_params!(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);

impl<T: ToValue> Params for [T] {
    fn values(&self) -> Vec<ValueRef<'_>> {
        self.iter().map(ToValue::to_value).collect()
    }
}

impl<P: Params + ?Sized> Params for &P {
    fn values(&self) -> Vec<ValueRef<'_>> {
        (**self).values()
    }
}

impl<T: ToValue> Params for Vec<T> {
    fn values(&self) -> Vec<ValueRef<'_>> {
        self.iter().map(ToValue::to_value).collect()
    }
}

impl Params for () {
    fn values(&self) -> Vec<ValueRef<'_>> {
        Vec::new()
    }
}

macro_rules! tuple_params {
    ($($name:ident . $idx:tt),+) => {
        impl<$($name: ToValue),+> Params for ($($name,)+) {
            fn values(&self) -> Vec<ValueRef<'_>> {
                vec![$(self.$idx.to_value()),+]
            }
        }
    };
}
tuple_params!(A.0);
tuple_params!(A.0, B.1);
tuple_params!(A.0, B.1, C.2);
tuple_params!(A.0, B.1, C.2, D.3);
tuple_params!(A.0, B.1, C.2, D.3, E.4);
tuple_params!(A.0, B.1, C.2, D.3, E.4, F.5);
tuple_params!(A.0, B.1, C.2, D.3, E.4, F.5, G.6);
tuple_params!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7);
tuple_params!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8);
tuple_params!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9);
tuple_params!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9, K.10);
tuple_params!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9, K.10, L.11);
tuple_params!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9, K.10, L.11, M.12);
tuple_params!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9, K.10, L.11, M.12, N.13);
tuple_params!(
    A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9, K.10, L.11, M.12, N.13, O.14
);
tuple_params!(
    A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9, K.10, L.11, M.12, N.13, O.14, P.15
);

/// Builds a parameter list of mixed types as a `Vec<ValueRef>` (like `rusqlite::params!`).
#[macro_export]
macro_rules! params {
    ($($v:expr),* $(,)?) => {
        ::std::vec![$($crate::ToValue::to_value(&$v)),*]
    };
}
