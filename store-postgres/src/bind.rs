//! Parameters: a [`ValueRef`] encoded for whatever type PostgreSQL inferred for its
//! placeholder, so the store's SQL binds an `i64` to a `BIGINT` column, to an `INTEGER`
//! expression (`?1 + 1`) or to a placeholder PostgreSQL typed `text` (`SELECT ?1`) alike.

use ahp_store_sql::ValueRef;
use bytes::{BufMut, BytesMut};
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// One statement parameter: its zero-based position (for the error) and its value.
#[derive(Debug)]
pub(crate) struct Param<'a> {
    pub(crate) index: usize,
    pub(crate) value: ValueRef<'a>,
}

/// A value that cannot be encoded as the type PostgreSQL inferred for its placeholder.
#[derive(Debug, thiserror::Error)]
#[error("parameter ?{}: {message}", .index + 1)]
pub(crate) struct BindError {
    /// Zero-based parameter index.
    pub(crate) index: usize,
    message: String,
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl Param<'_> {
    fn refuse(&self, message: String) -> BoxError {
        Box::new(BindError {
            index: self.index,
            message,
        })
    }

    fn kind(&self) -> &'static str {
        match self.value {
            ValueRef::Null => "null",
            ValueRef::Integer(_) => "an integer",
            ValueRef::Text(_) => "text",
            ValueRef::Blob(_) => "a blob",
        }
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match self.value {
            ValueRef::Null => Ok(IsNull::Yes),
            ValueRef::Integer(i) => self.integer(i, ty, out),
            // PostgreSQL text cannot hold U+0000 (SQLite's can): refused here, by name, rather
            // than as the server's encoding error.
            ValueRef::Text(s) if s.contains('\0') => {
                Err(self.refuse("text containing U+0000 (NUL), which PostgreSQL cannot store".to_owned()))
            }
            ValueRef::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR | Type::UNKNOWN | Type::JSON => {
                    out.put_slice(s.as_bytes());
                    Ok(IsNull::No)
                }
                Type::JSONB => {
                    // The binary JSONB format: a version byte, then the text.
                    out.put_u8(1);
                    out.put_slice(s.as_bytes());
                    Ok(IsNull::No)
                }
                _ => Err(self.refuse(format!("cannot bind {} to a {} placeholder", self.kind(), ty.name()))),
            },
            ValueRef::Blob(b) => match *ty {
                Type::BYTEA => {
                    out.put_slice(b);
                    Ok(IsNull::No)
                }
                _ => Err(self.refuse(format!("cannot bind {} to a {} placeholder", self.kind(), ty.name()))),
            },
        }
    }

    /// Every type: the value decides at encoding time (`to_sql`), with a clear error.
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl Param<'_> {
    fn integer(&self, i: i64, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let range = |name: &str| self.refuse(format!("{i} is out of range for {name}"));
        match *ty {
            Type::INT8 => out.put_i64(i),
            Type::INT4 => out.put_i32(i32::try_from(i).map_err(|_| range("int4 (integer)"))?),
            Type::INT2 => out.put_i16(i16::try_from(i).map_err(|_| range("int2 (smallint)"))?),
            Type::BOOL => match i {
                0 | 1 => out.put_u8(u8::from(i == 1)),
                _ => return Err(self.refuse(format!("{i} is not a boolean (0 or 1)"))),
            },
            Type::NUMERIC => encode_numeric(i, out),
            Type::TEXT | Type::VARCHAR | Type::UNKNOWN => out.put_slice(i.to_string().as_bytes()),
            _ => return Err(self.refuse(format!("cannot bind {} to a {} placeholder", self.kind(), ty.name()))),
        }
        Ok(IsNull::No)
    }
}

/// `NUMERIC`'s binary form of an integer: the count of base-10000 digits, the weight of the
/// first, the sign, the display scale (0), then the digits, most significant first, trailing
/// zero digits left out (the weight places them).
pub(crate) fn encode_numeric(i: i64, out: &mut BytesMut) {
    let mut magnitude = i.unsigned_abs();
    let mut digits = Vec::new(); // least significant first
    while magnitude > 0 {
        digits.push(u16::try_from(magnitude % 10_000).expect("a base-10000 digit fits in u16"));
        magnitude /= 10_000;
    }
    let weight = i16::try_from(digits.len()).map_or(0, |n| n - 1).max(0);
    while digits.first() == Some(&0) {
        digits.remove(0);
    }
    let count = i16::try_from(digits.len()).expect("an i64 has at most 5 base-10000 digits");
    out.put_i16(count);
    out.put_i16(weight);
    out.put_u16(if i < 0 { 0x4000 } else { 0x0000 });
    out.put_u16(0);
    for d in digits.iter().rev() {
        out.put_u16(*d);
    }
}
