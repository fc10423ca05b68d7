//! What a component creates when instantiated — core instances, linear memories and tables —
//! counted from the component itself, so a tier's count ceilings refuse it before anything is
//! allocated or any guest code runs.
//!
//! Memories and tables come from wasmtime's own translation of the component
//! ([`Component::resources_required`]: the memories and tables its core modules define, for
//! every instantiation). wasmtime 48 exposes no count of core instances, so those are counted
//! from the component's binary with the `wasmparser` wasmtime itself uses: every core
//! `instantiate`, plus, for every component `instantiate`, the core instances of the component
//! it instantiates (nested, aliased or re-exported). That is exactly what wasmtime creates for
//! an ordinary guest; the one thing it does not see is the adapter modules wasmtime adds when
//! one component's lifted function is lowered into *another* component (fused adapters), so for
//! composed components it is a lower bound, and the Store's
//! [`Limiter`](super::limits) remains the runtime backstop.

use wasmtime::component::Component;
use wasmtime::wasmparser::{
    ComponentAlias, ComponentExternalKind, ComponentInstance, ComponentOuterAliasKind, ComponentTypeRef, Encoding,
    Instance, Parser, Payload,
};

use super::limits::{Ceiling, Ceilings};

/// What instantiating one component creates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ComponentCounts {
    /// Core module instances.
    pub instances: u32,
    /// Linear memories its core instances define.
    pub memories: u32,
    /// Tables its core instances define.
    pub tables: u32,
}

/// A component whose counts could not be determined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CountError {
    /// The binary could not be parsed.
    #[error("cannot be parsed: {0}")]
    Parse(String),
    /// The component instantiates a core module it imports, whose size nobody can know in
    /// advance (and which no ahp host provides).
    #[error("instantiates an imported core module")]
    ImportedModule,
}

impl ComponentCounts {
    /// The counts of `component`, compiled from `wasm` (binary, or the text format wasmtime
    /// also accepts).
    ///
    /// # Errors
    ///
    /// [`CountError`] if `wasm` does not parse or instantiates an imported core module.
    pub fn of(component: &Component, wasm: &[u8]) -> Result<Self, CountError> {
        let resources = component.resources_required().ok_or(CountError::ImportedModule)?;
        let binary = wat::parse_bytes(wasm).map_err(|e| CountError::Parse(e.to_string()))?;
        Ok(Self {
            instances: core_instances(&binary)?,
            memories: resources.num_memories,
            tables: resources.num_tables,
        })
    }

    /// The first count ceiling of `ceilings` these counts exceed (instances, then memories,
    /// then tables), if any.
    pub fn breach(&self, ceilings: &Ceilings) -> Option<Ceiling> {
        [Ceiling::Instances, Ceiling::Memories, Ceiling::Tables]
            .into_iter()
            .find(|&c| {
                self.get(c)
                    .zip(count_limit(ceilings, c))
                    .is_some_and(|(n, max)| n > max)
            })
    }

    /// The count that `ceiling` bounds, for the three count ceilings.
    pub fn get(&self, ceiling: Ceiling) -> Option<u32> {
        match ceiling {
            Ceiling::Instances => Some(self.instances),
            Ceiling::Memories => Some(self.memories),
            Ceiling::Tables => Some(self.tables),
            _ => None,
        }
    }
}

fn count_limit(c: &Ceilings, ceiling: Ceiling) -> Option<u32> {
    match ceiling {
        Ceiling::Instances => Some(c.instances),
        Ceiling::Memories => Some(c.memories),
        Ceiling::Tables => Some(c.tables),
        _ => None,
    }
}

/// One component being parsed: its running total of core instances, and the core instances
/// of every entry of its component index space so far.
#[derive(Default)]
struct Scope {
    instances: u64,
    components: Vec<u64>,
}

type ParseResult<T> = Result<T, wasmtime::wasmparser::BinaryReaderError>;

/// The core instances instantiating the component `wasm` creates.
fn core_instances(wasm: &[u8]) -> Result<u32, CountError> {
    let parse = |e: wasmtime::wasmparser::BinaryReaderError| CountError::Parse(e.to_string());
    // One entry per component or core module being parsed, innermost last; `None` is a core
    // module, whose contents do not matter here.
    let mut stack: Vec<Option<Scope>> = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.map_err(parse)? {
            Payload::Version { encoding, .. } => stack.push((encoding == Encoding::Component).then(Scope::default)),
            Payload::End(_) => match (stack.pop().flatten(), stack.last_mut()) {
                (Some(done), Some(Some(parent))) => parent.components.push(done.instances),
                (Some(done), None) => return Ok(u32::try_from(done.instances).unwrap_or(u32::MAX)),
                // A core module ended.
                _ => {}
            },
            other => {
                if matches!(stack.last(), Some(Some(_))) {
                    count(&mut stack, &other).map_err(parse)?;
                }
            }
        }
    }
    Err(CountError::Parse("the binary ended inside a component".into()))
}

/// Adds what one section of the innermost component (the last of `stack`) instantiates or
/// defines.
fn count(stack: &mut [Option<Scope>], payload: &Payload<'_>) -> ParseResult<()> {
    // Every ancestor of a component is a component: a core module cannot nest one.
    let depth = stack.len();
    let outer = |stack: &[Option<Scope>], up: u32, index: u32| -> u64 {
        let at = depth.checked_sub(1 + up as usize);
        at.and_then(|i| stack[i].as_ref())
            .and_then(|s| s.components.get(index as usize))
            .copied()
            .unwrap_or(0)
    };
    match payload {
        Payload::InstanceSection(reader) => {
            for instance in reader.clone() {
                if let Instance::Instantiate { .. } = instance? {
                    scope(stack).instances += 1;
                }
            }
        }
        Payload::ComponentInstanceSection(reader) => {
            for instance in reader.clone() {
                if let ComponentInstance::Instantiate { component_index, .. } = instance? {
                    let s = scope(stack);
                    let n = s.components.get(component_index as usize).copied().unwrap_or(0);
                    s.instances = s.instances.saturating_add(n);
                }
            }
        }
        Payload::ComponentImportSection(reader) => {
            for import in reader.clone() {
                // An imported component cannot be provided by an ahp host: it counts as empty.
                if let ComponentTypeRef::Component(_) = import?.ty {
                    scope(stack).components.push(0);
                }
            }
        }
        Payload::ComponentExportSection(reader) => {
            for export in reader.clone() {
                let export = export?;
                if export.kind == ComponentExternalKind::Component {
                    let s = scope(stack);
                    let n = s.components.get(export.index as usize).copied().unwrap_or(0);
                    s.components.push(n);
                }
            }
        }
        Payload::ComponentAliasSection(reader) => {
            for alias in reader.clone() {
                match alias? {
                    ComponentAlias::Outer {
                        kind: ComponentOuterAliasKind::Component,
                        count,
                        index,
                    } => {
                        let n = outer(stack, count, index);
                        scope(stack).components.push(n);
                    }
                    // A component exported by an instance: only an imported or instantiated
                    // one can export it, and what it holds is not known here.
                    ComponentAlias::InstanceExport {
                        kind: ComponentExternalKind::Component,
                        ..
                    } => scope(stack).components.push(0),
                    _ => {}
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn scope(stack: &mut [Option<Scope>]) -> &mut Scope {
    stack
        .last_mut()
        .and_then(Option::as_mut)
        .expect("count is only called inside a component")
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::Linker;
    use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder};

    /// A module with a memory and a table, instantiated twice at the top level; an export-only
    /// core instance (creates nothing); a nested component with two core instances (one with a
    /// memory), instantiated twice directly and once more through an outer alias two levels
    /// down. 2 + 2 × 2 + 2 = 8 core instances, 2 + 3 = 5 memories, 2 tables.
    const NESTED: &str = r#"
        (component $root
          (core module $m (memory (export "mem") 1) (table 1 funcref))
          (core instance $i (instantiate $m))
          (core instance (instantiate $m))
          (core instance (export "mem" (memory $i "mem")))
          (component $c
            (core module $inner (memory 1))
            (core module $empty)
            (core instance (instantiate $inner))
            (core instance (instantiate $empty)))
          (instance (instantiate $c))
          (instance (instantiate $c))
          (component $grandparent
            (component $child
              (alias outer $root $c (component $again))
              (instance (instantiate $again)))
            (instance (instantiate $child)))
          (instance (instantiate $grandparent)))
    "#;

    fn engine() -> Engine {
        let mut c = Config::new();
        c.wasm_component_model(true);
        Engine::new(&c).unwrap()
    }

    /// Instantiates `component` in a Store that allows `instances` core instances.
    fn instantiate_under(engine: &Engine, component: &Component, instances: usize) -> wasmtime::Result<()> {
        let limits = StoreLimitsBuilder::new().instances(instances).build();
        let mut store: Store<StoreLimits> = Store::new(engine, limits);
        store.limiter(|l| l);
        Linker::new(engine).instantiate(&mut store, component).map(drop)
    }

    #[test]
    fn counts_exactly_what_wasmtime_instantiates() {
        let engine = engine();
        let component = Component::new(&engine, NESTED).unwrap();
        let counts = ComponentCounts::of(&component, NESTED.as_bytes()).unwrap();
        assert_eq!(
            counts,
            ComponentCounts {
                instances: 8,
                memories: 5,
                tables: 2
            }
        );
        instantiate_under(&engine, &component, 8).unwrap();
        let refused = instantiate_under(&engine, &component, 7).unwrap_err();
        assert!(
            format!("{refused:#}").contains("instance count too high"),
            "{refused:#}"
        );
    }

    #[test]
    fn breach_names_the_first_count_over_its_ceiling() {
        let nano = *ahp_store::Tier::Nano.limits();
        let fits = ComponentCounts {
            instances: nano.instances,
            memories: nano.memories,
            tables: nano.tables,
        };
        assert_eq!(fits.breach(&nano), None);
        let tables = ComponentCounts {
            tables: nano.tables + 1,
            ..fits
        };
        assert_eq!(tables.breach(&nano), Some(Ceiling::Tables));
        let both = ComponentCounts {
            memories: nano.memories + 1,
            ..tables
        };
        assert_eq!(both.breach(&nano), Some(Ceiling::Memories));
        assert_eq!(both.get(Ceiling::Memory), None, "not a count ceiling");
    }

    #[test]
    fn garbage_is_a_parse_error() {
        assert!(matches!(
            core_instances(b"\0asm\x0d\0\x01\0garbage"),
            Err(CountError::Parse(_))
        ));
    }
}
