//! Activations computed elsewhere (`representational.activations`) on the tiny random Llama:
//! a run's activations exported by `pstat_study::export::activations` and read back by a
//! second run (with an empty activation cache, so nothing is extracted) give byte-identical
//! stability tables; a damaged or tampered export is refused with the file and the field.

mod imported;
mod tiny_llama;

use imported::{config, use_home};
use pstat_data::activations::{Activations, Precision};
use pstat_study::{Silent, execute};
use std::path::{Path, PathBuf};
use tiny_llama::{vocabulary, write_tiny_llama};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

#[test]
fn exported_activations_read_back_give_the_same_tables_and_tampering_is_refused() {
    let Some(vocab) = vocabulary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-llama.gguf");
    write_tiny_llama(&vocab, &model);

    use_home(&dir.path().join("home-a"));
    let plain = dir.path().join("plain");
    execute(config(&model, None), &plain, &mut Silent).unwrap();
    let exported = dir.path().join("exported");
    let cells =
        pstat_study::export::activations(config(&model, None), &exported, false, &mut Silent)
            .unwrap();
    let cell = exported.join("tiny-llama").join("city_locations");
    assert_eq!(cells, std::slice::from_ref(&cell));
    for file in [
        "layer_02.safetensors",
        "layer_03.safetensors",
        "layer_04.safetensors",
        "statements.jsonl",
        "export.json",
    ] {
        assert!(cell.join(file).exists(), "no {file}");
    }

    // Another machine: an empty cache, so every activation must come from the export.
    let home_b = dir.path().join("home-b");
    use_home(&home_b);
    let imported = dir.path().join("imported");
    execute(config(&model, Some(&exported)), &imported, &mut Silent).unwrap();
    for table in ["stability.csv", "comparisons.csv"] {
        assert_eq!(
            std::fs::read(plain.join(table)).unwrap(),
            std::fs::read(imported.join(table)).unwrap(),
            "{table} differs"
        );
    }
    assert!(
        !home_b.join("activations").exists(),
        "the imported run extracted activations"
    );

    // Tampered copies: each is refused, naming the file and what is wrong.
    let refused = |name: &str, tamper: &dyn Fn(&Path)| -> String {
        let copy = dir.path().join(format!("tampered-{name}"));
        copy_dir(&exported, &copy);
        let file: PathBuf = copy
            .join("tiny-llama")
            .join("city_locations")
            .join("layer_03.safetensors");
        tamper(&file);
        let out = dir.path().join(format!("run-{name}"));
        let err = format!(
            "{:#}",
            execute(config(&model, Some(&copy)), &out, &mut Silent).unwrap_err()
        );
        assert!(err.contains(&file.display().to_string()), "{err}");
        err
    };
    let rewrite = |file: &Path, change: &dyn Fn(&mut Activations)| {
        let mut acts = Activations::read(file).unwrap();
        change(&mut acts);
        acts.write(file, Precision::F16).unwrap();
    };
    let err = refused("garbled", &|file| {
        let mut bytes = std::fs::read(file).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(file, bytes).unwrap();
    });
    assert!(err.contains("content hash mismatch"), "{err}");
    let err = refused("model", &|file| {
        rewrite(file, &|a| {
            a.metadata.insert("model_sha256".into(), "0".repeat(64));
        })
    });
    assert!(err.contains("metadata `model_sha256`"), "{err}");
    let err = refused("layer", &|file| {
        rewrite(file, &|a| {
            a.metadata.insert("layer".into(), "4".into());
        })
    });
    assert!(err.contains("metadata `layer` is \"4\""), "{err}");
    let err = refused("ids", &|file| {
        rewrite(file, &|a| a.statement_ids.swap(0, 1))
    });
    assert!(err.contains("`statement_ids`[0]"), "{err}");
    let err = refused("tokens", &|file| rewrite(file, &|a| a.token_ids[1] ^= 1));
    assert!(err.contains("`token_ids` differ"), "{err}");
    let err = refused("missing", &|file| std::fs::remove_file(file).unwrap());
    assert!(err.contains("missing"), "{err}");
}
