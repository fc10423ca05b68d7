//! The component registry: which guest components the host knows, by digest and optional name.
//!
//! The bytes themselves live on the host's disk (named by digest); this table records that a
//! digest was registered, its size and when, and the human name `provision_runtime` may use
//! instead of the digest. A name points at one digest; registering it again moves it.

use ahp_store_sql::{OptionalExtension, Tx};
use serde::Serialize;

use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::lifecycle::validate_component;

/// Largest component the registry accepts, in bytes. A Rust agent built with the guest SDK is
/// well under 1 MiB; a Python one (componentize-py 0.25: CPython, the modules it imports,
/// pre-initialized) about 19 MiB. 32 MiB leaves room for a Python agent's own modules without
/// letting a registration fill the disk (a Python component compiles in seconds, once: the
/// host caches the compiled code).
pub const MAX_COMPONENT_BYTES: u64 = 32 * 1024 * 1024;

/// One registered component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentRecord {
    /// `sha256:` and 64 lowercase hex digits of the component's bytes.
    pub digest: String,
    /// The name it was registered under, if any.
    pub name: Option<String>,
    /// Size of the component in bytes.
    pub size_bytes: u64,
    /// When it was (last) registered.
    pub registered_at: Timestamp,
}

/// `sha256:` and the lowercase hex SHA-256 of `bytes`: a component's content address.
pub fn digest_of(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

impl Store {
    /// Records that the component with `digest` (`size_bytes` long) is registered, optionally
    /// under `name`. Registering a known digest again refreshes it; giving a name that belonged
    /// to another digest moves the name.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed digest or name, or a size outside
    /// 1..=[`MAX_COMPONENT_BYTES`].
    pub fn register_component(&mut self, digest: &str, name: Option<&str>, size_bytes: u64) -> Result<ComponentRecord> {
        if !is_digest(digest) {
            return Err(Error::invalid(
                "digest",
                "must be sha256: followed by 64 lowercase hex digits",
            ));
        }
        if let Some(name) = name {
            if is_digest(name) || name.starts_with("sha256:") {
                return Err(Error::invalid("name", "may not look like a digest"));
            }
            validate_component(name).map_err(|_| {
                Error::invalid(
                    "name",
                    "must be 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit",
                )
            })?;
        }
        if size_bytes == 0 || size_bytes > MAX_COMPONENT_BYTES {
            return Err(Error::invalid(
                "sizeBytes",
                format!("must be 1 to {MAX_COMPONENT_BYTES}"),
            ));
        }
        let now = self.now();
        self.write(|tx| {
            if let Some(name) = name {
                tx.execute(
                    "UPDATE components SET name = NULL WHERE name = ?1 AND digest <> ?2",
                    (name, digest),
                )?;
            }
            tx.execute(
                "INSERT INTO components (digest, name, size_bytes, registered_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (digest) DO UPDATE SET name = coalesce(?2, components.name), registered_at = ?4",
                (digest, name, size_bytes as i64, now.as_micros()),
            )?;
            load(tx, digest)?.ok_or_else(|| Error::CorruptRow {
                table: "components",
                reason: format!("{digest} vanished inside its own transaction"),
            })
        })
    }

    /// Keeps the bytes of the registered component `digest` in the database, so every host
    /// sharing it can load the component ([`component_bytes`](Self::component_bytes)); a host's
    /// own files are then only a cache. Storing them again is a no-op.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when `bytes` are empty, larger than [`MAX_COMPONENT_BYTES`] or
    /// not what `digest` names, or when no component `digest` is registered.
    pub fn store_component_bytes(&mut self, digest: &str, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() || bytes.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(Error::invalid(
                "component",
                format!("must be 1 to {MAX_COMPONENT_BYTES} bytes"),
            ));
        }
        if digest_of(bytes) != digest {
            return Err(Error::invalid("digest", "is not the SHA-256 of the bytes"));
        }
        self.write(|tx| {
            if load(tx, digest)?.is_none() {
                return Err(Error::invalid("digest", format!("{digest} is not registered")));
            }
            tx.execute(
                "INSERT INTO component_bytes (digest, bytes) VALUES (?1, ?2) ON CONFLICT (digest) DO NOTHING",
                (digest, bytes),
            )?;
            Ok(())
        })
    }

    /// The bytes of component `digest` the database keeps, if it keeps them (a component
    /// registered before the database kept bytes has only its host's file).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed digest; [`Error::CorruptRow`] when the stored
    /// bytes are not what their digest names (never handed to a host to run).
    pub fn component_bytes(&mut self, digest: &str) -> Result<Option<Vec<u8>>> {
        if !is_digest(digest) {
            return Err(Error::invalid(
                "digest",
                "must be sha256: followed by 64 lowercase hex digits",
            ));
        }
        let bytes: Option<Vec<u8>> = self
            .autocommit()
            .prepare_cached("SELECT bytes FROM component_bytes WHERE digest = ?1")?
            .query_row([digest], |r| r.get(0))
            .optional()?;
        match bytes {
            Some(b) if digest_of(&b) != digest => Err(Error::corrupt(
                "component_bytes",
                format!("the bytes stored as {digest} have another digest"),
            )),
            other => Ok(other),
        }
    }

    /// The registered component a digest or a name refers to, if any.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed reference.
    pub fn component(&mut self, digest_or_name: &str) -> Result<Option<ComponentRecord>> {
        validate_component(digest_or_name)?;
        if is_digest(digest_or_name) {
            return load(&self.autocommit(), digest_or_name);
        }
        let digest: Option<String> = self
            .autocommit()
            .prepare_cached("SELECT digest FROM components WHERE name = ?1")?
            .query_row([digest_or_name], |r| r.get(0))
            .optional()?;
        match digest {
            Some(d) => load(&self.autocommit(), &d),
            None => Ok(None),
        }
    }
}

fn load(conn: &Tx<'_>, digest: &str) -> Result<Option<ComponentRecord>> {
    Ok(conn
        .prepare_cached("SELECT digest, name, size_bytes, registered_at FROM components WHERE digest = ?1")?
        .query_row([digest], |r| {
            Ok(ComponentRecord {
                digest: r.get(0)?,
                name: r.get(1)?,
                size_bytes: r.get::<_, i64>(2)? as u64,
                registered_at: Timestamp::from_micros(r.get(3)?),
            })
        })
        .optional()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn registers_resolves_and_moves_names() {
        let mut s = crate::testing::store().unwrap();
        let r = s.register_component(D1, Some("forecaster"), 80_000).unwrap();
        assert_eq!(r.name.as_deref(), Some("forecaster"));
        assert_eq!(s.component("forecaster").unwrap().unwrap().digest, D1);
        assert_eq!(s.component(D1).unwrap().unwrap().size_bytes, 80_000);
        // Re-registering without a name keeps the name.
        s.register_component(D1, None, 80_000).unwrap();
        assert_eq!(s.component("forecaster").unwrap().unwrap().digest, D1);
        // The name moves to the new build.
        s.register_component(D2, Some("forecaster"), 90_000).unwrap();
        assert_eq!(s.component("forecaster").unwrap().unwrap().digest, D2);
        assert_eq!(s.component(D1).unwrap().unwrap().name, None);
        assert_eq!(s.component("unknown").unwrap(), None);
    }

    #[test]
    fn refuses_bad_digests_names_and_sizes() {
        let mut s = crate::testing::store().unwrap();
        for (digest, name, size) in [
            ("sha256:abc", None, 1),
            (D1, Some("Upper"), 1),
            (D1, Some("sha256:x"), 1),
            (D1, None, 0),
            (D1, None, MAX_COMPONENT_BYTES + 1),
        ] {
            assert!(matches!(
                s.register_component(digest, name, size),
                Err(Error::InvalidInput { .. })
            ));
        }
        assert!(s.register_component(D1, None, MAX_COMPONENT_BYTES).is_ok());
    }

    #[test]
    fn bytes_are_kept_by_digest_and_checked_both_ways() {
        let mut s = crate::testing::store().unwrap();
        let bytes = b"\0asm component bytes".to_vec();
        let digest = super::digest_of(&bytes);
        assert!(
            matches!(
                s.store_component_bytes(&digest, &bytes),
                Err(Error::InvalidInput { .. })
            ),
            "unregistered"
        );
        s.register_component(&digest, None, bytes.len() as u64).unwrap();
        assert!(
            matches!(s.store_component_bytes(D1, &bytes), Err(Error::InvalidInput { .. })),
            "wrong digest"
        );
        assert!(matches!(
            s.store_component_bytes(&digest, &[]),
            Err(Error::InvalidInput { .. })
        ));
        let too_big = vec![0u8; MAX_COMPONENT_BYTES as usize + 1];
        assert!(matches!(
            s.store_component_bytes(&digest, &too_big),
            Err(Error::InvalidInput { .. })
        ));
        assert_eq!(s.component_bytes(&digest).unwrap(), None);
        s.store_component_bytes(&digest, &bytes).unwrap();
        s.store_component_bytes(&digest, &bytes).unwrap();
        assert_eq!(s.component_bytes(&digest).unwrap(), Some(bytes));
        // A row whose bytes are not its digest's is never handed out.
        s.autocommit()
            .execute("UPDATE component_bytes SET bytes = ?1", [b"tampered".as_slice()])
            .unwrap();
        assert!(matches!(s.component_bytes(&digest), Err(Error::CorruptRow { .. })));
        assert!(matches!(
            s.component_bytes("forecaster"),
            Err(Error::InvalidInput { .. })
        ));
    }
}
