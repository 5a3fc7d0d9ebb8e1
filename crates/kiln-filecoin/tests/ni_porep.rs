//! Non-interactive PoRep requests, without proving (seconds): refused with
//! a clear error while the SnarkPack SRS is missing, and once a (fake, test)
//! SRS is in the parameter cache, a job of the NI partitions over the
//! interactive PoRep's parameters. This binary has a parameter cache of its
//! own (filecoin-proofs reads its settings once per process), which never
//! holds parameters. The full path (13 partitions proved, aggregated,
//! `verify_seal`, filecoin-proofs' own answer) is the ignored
//! `ni_porep_is_proved_by_kiln_and_accepted_by_verify_seal` in kinds.rs.

#[path = "support/fake_srs.rs"]
mod fake_srs;

use kiln_filecoin::porep::{self, PorepRequest};
use kiln_filecoin::{ni_porep, registered, vanilla};
use rand::SeedableRng;

#[test]
fn ni_porep_needs_the_inner_product_srs_and_then_proves_its_partitions_with_the_porep_parameters() {
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let cache = tmp.join("fil-params-ni-srs");
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &cache);
    std::env::set_var("FIL_PROOFS_PARENT_CACHE", tmp.join("fil-params").join("parents"));
    let srs = ni_porep::srs_path();
    assert_eq!(srs, cache.join("v28-fil-inner-product-v1.srs"), "filecoin-proofs' name, in the parameter cache");
    let _ = std::fs::remove_file(&srs);

    let work = tempfile::tempdir().unwrap();
    let p = vanilla::generate_ni_porep(2048, work.path(), &mut rand_chacha::ChaCha8Rng::seed_from_u64(11)).unwrap();
    let proof = registered::seal_proof(p.registered_proof).unwrap();
    assert_eq!(format!("{proof:?}"), "StackedDrg2KiBV1_2_Feat_NonInteractivePoRep");
    let req = PorepRequest { sector_size: p.sector_size, registered_proof: p.registered_proof, sector_number: p.sector_number };

    let e = porep::job(&p.vanilla_proof, &req).err().expect("refused without the SRS");
    for words in ["v28-fil-inner-product-v1.srs", &cache.display().to_string(), "FIL_PROOFS_PARAMETER_CACHE", "never generates it", "paramfetch"] {
        assert!(e.contains(words), "{e:?} lacks {words:?}");
    }

    fake_srs::ensure_fake_srs(&srs);
    // filecoin-proofs reads the fake file and specializes it for the
    // 13 partitions (16 after padding), prover and verifier side.
    let config = proof.as_v1_config();
    assert_eq!(config.partitions.0, 13);
    filecoin_proofs::caches::get_stacked_srs_key::<filecoin_proofs::SectorShape2KiB>(&config, 16).unwrap();
    filecoin_proofs::caches::get_stacked_srs_verifier_key::<filecoin_proofs::SectorShape2KiB>(&config, 16).unwrap();

    let j = porep::job(&p.vanilla_proof, &req).unwrap();
    assert_eq!(j.num_partitions(), 13);
    assert_eq!(j.kind_label(), "ni-porep-c2");
    let interactive = porep::param_set(kiln_filecoin::current_seal_proof(2048).unwrap()).unwrap();
    assert_eq!(j.srs().id, interactive.cache_id, "NI-PoRep partitions are the interactive PoRep circuit (2 challenges each at 2 KiB)");
    assert!(kiln_filecoin::all_param_sets().unwrap().iter().any(|s| s.cache_id == j.srs().id));
}
