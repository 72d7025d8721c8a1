//! The hand-written declarations of `ffi` against PCP's own headers: a C
//! program compiled against /usr/include/pcp prints sizes, offsets and
//! macro values, which must equal the Rust ones. `pmdaExt` is checked whole:
//! its size, the fields the agent touches, and its last field last; the
//! result of a fetch (`pmResult`, `pmValueSet`, `pmValue`, a value block's
//! header) as the agent's own fetch lays it out.

use std::mem::{offset_of, size_of};
use std::process::Command;

use perfabi_pcp_agent::ffi::*;

const PROGRAM: &str = r#"
#include <stddef.h>
#include <stdio.h>
#include <pcp/pmapi.h>
#include <pcp/pmda.h>
int main(void) {
    pmUnits us = PMDA_PMUNITS(0,1,0,0,PM_TIME_USEC,0), b = PMDA_PMUNITS(1,0,0,PM_SPACE_BYTE,0,0);
    pmUnits c = PMDA_PMUNITS(0,0,1,0,0,PM_COUNT_ONE), neg = PMDA_PMUNITS(-1,1,0,PM_SPACE_KBYTE,PM_TIME_SEC,0);
    printf("sizeof_interface %zu\n", sizeof(pmdaInterface));
    printf("offset_ext %zu\n", offsetof(pmdaInterface, version.four.ext));
    printf("offset_fetch %zu\n", offsetof(pmdaInterface, version.four.fetch));
    printf("offset_text %zu\n", offsetof(pmdaInterface, version.four.text));
    printf("offset_children %zu\n", offsetof(pmdaInterface, version.four.children));
    printf("offset_attribute %zu\n", offsetof(pmdaInterface, version.seven.attribute));
    printf("offset_label %zu\n", offsetof(pmdaInterface, version.seven.label));
    printf("sizeof_ext %zu\n", sizeof(pmdaExt));
    printf("offset_nindoms %zu\n", offsetof(pmdaExt, e_nindoms));
    printf("offset_indoms %zu\n", offsetof(pmdaExt, e_indoms));
    printf("offset_labelcb %zu\n", offsetof(pmdaExt, e_labelCallBack));
    printf("labels %d %d %d %d %d %d\n", PMDA_INTERFACE_7, PM_LABEL_DOMAIN, PM_LABEL_INDOM,
        PM_LABEL_CLUSTER, PM_LABEL_ITEM, PM_LABEL_INSTANCES);
    printf("inresult %zu %zu %zu %d %d\n", sizeof(pmInResult), offsetof(pmInResult, instlist),
        offsetof(pmInResult, namelist), PM_ERR_INST, (int)PM_IN_NULL);
    printf("sizeof_desc %zu\n", sizeof(pmDesc));
    printf("offset_units %zu\n", offsetof(pmDesc, units));
    printf("sizeof_metric %zu\n", sizeof(pmdaMetric));
    printf("sizeof_indom %zu\n", sizeof(pmdaIndom));
    printf("sizeof_instid %zu\n", sizeof(pmdaInstid));
    printf("sizeof_atom %zu\n", sizeof(pmAtomValue));
    printf("units_us %u\n", *(unsigned *)&us);
    printf("units_bytes %u\n", *(unsigned *)&b);
    printf("units_count %u\n", *(unsigned *)&c);
    printf("units_neg %u\n", *(unsigned *)&neg);
    printf("pmid %u\n", (unsigned)pmID_build(502, 2048, 1023));
    printf("indom %u\n", (unsigned)pmInDom_build(502, 2));
    printf("consts %d %d %d %d %d %d %d %d\n", PMDA_INTERFACE_4, PMDA_EXT_FLAG_HASHED,
        PM_TYPE_U64, PM_SEM_DISCRETE, PM_TEXT_INDOM, PM_ERR_TEXT, PM_ERR_PMID, PMDA_FETCH_STATIC);
    printf("errors %d %d %d\n", PM_ERR_NAME, PM_ERR_AGAIN, PM_ERR_GENERIC);
    printf("pmns %d %d\n", PMNS_LEAF_STATUS, PMNS_NONLEAF_STATUS);
    pmValueBlock vb;
    vb.vlen = 12; vb.vtype = PM_TYPE_U64;
    printf("result %zu %zu %zu %zu %zu %zu %u\n", offsetof(pmResult, vset), sizeof(pmValueSet),
        offsetof(pmValueSet, vlist), offsetof(pmValueSet, valfmt), sizeof(pmValue),
        offsetof(pmValue, value), *(unsigned *)&vb);
    printf("values %d %d %d %d %d %zu\n", PM_VAL_INSITU, PM_VAL_DPTR, PM_VAL_HDR_SIZE, PM_ERR_TYPE,
        PM_TYPE_32, offsetof(pmdaExt, e_resultCallBack));
    printf("cache %d %d %d %d %d %d %d %d\n", PMDA_CACHE_LOAD, PMDA_CACHE_ADD, PMDA_CACHE_CULL,
        PMDA_CACHE_SAVE, PMDA_CACHE_ACTIVE, PMDA_CACHE_INACTIVE, PMDA_CACHE_WALK_REWIND,
        PMDA_CACHE_WALK_NEXT);
    return 0;
}
"#;

#[test]
fn rust_declarations_match_pcp_s_headers() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("layout.c");
    let bin = dir.path().join("layout");
    std::fs::write(&src, PROGRAM).unwrap();
    let cc = Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .arg("-lpcp")
        .output()
        .expect("a C compiler (cc) is needed: run tests/setup");
    assert!(
        cc.status.success(),
        "compiling against PCP's headers failed (is libpcp3-dev installed? run tests/setup):\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = String::from_utf8(Command::new(&bin).output().unwrap().stdout).unwrap();
    let want = format!(
        "sizeof_interface {}\noffset_ext {}\noffset_fetch {}\noffset_text {}\noffset_children {}\n\
         offset_attribute {}\noffset_label {}\nsizeof_ext {}\noffset_nindoms {}\noffset_indoms {}\n\
         offset_labelcb {}\nlabels {} {} {} {} {} {}\ninresult {} {} {} {} {}\n\
         sizeof_desc {}\noffset_units {}\nsizeof_metric {}\nsizeof_indom {}\nsizeof_instid {}\nsizeof_atom {}\n\
         units_us {}\nunits_bytes {}\nunits_count {}\nunits_neg {}\npmid {}\nindom {}\nconsts {} {} {} {} {} {} {} {}\n\
         errors {} {} {}\npmns {} {}\nresult {} {} {} {} {} {} {}\nvalues {} {} {} {} {} {}\n\
         cache {} {} {} {} {} {} {} {}\n",
        size_of::<pmdaInterface>(),
        offset_of!(pmdaInterface, four),
        offset_of!(pmdaInterface, four) + offset_of!(Four, fetch),
        offset_of!(pmdaInterface, four) + offset_of!(Four, text),
        offset_of!(pmdaInterface, four) + offset_of!(Four, children),
        offset_of!(pmdaInterface, attribute),
        offset_of!(pmdaInterface, label),
        size_of::<pmdaExt>(),
        offset_of!(pmdaExt, e_nindoms),
        offset_of!(pmdaExt, e_indoms),
        size_of::<pmdaExt>() - size_of::<*const u8>(),
        PMDA_INTERFACE_7,
        PM_LABEL_DOMAIN,
        PM_LABEL_INDOM,
        PM_LABEL_CLUSTER,
        PM_LABEL_ITEM,
        PM_LABEL_INSTANCES,
        size_of::<pmInResult>(),
        offset_of!(pmInResult, instlist),
        offset_of!(pmInResult, namelist),
        PM_ERR_INST,
        PM_IN_NULL,
        size_of::<pmDesc>(),
        offset_of!(pmDesc, units),
        size_of::<pmdaMetric>(),
        size_of::<pmdaIndom>(),
        size_of::<pmdaInstid>(),
        size_of::<pmAtomValue>(),
        pmUnits::new(0, 1, 0, 0, 1, 0).0,
        pmUnits::new(1, 0, 0, 0, 0, 0).0,
        pmUnits::new(0, 0, 1, 0, 0, 0).0,
        pmUnits::new(-1, 1, 0, 1, 3, 0).0,
        pmid(502, 2048, 1023),
        indom(502, 2),
        PMDA_INTERFACE_4,
        PMDA_EXT_FLAG_HASHED,
        PM_TYPE_U64,
        PM_SEM_DISCRETE,
        PM_TEXT_INDOM,
        PM_ERR_TEXT,
        PM_ERR_PMID,
        PMDA_FETCH_STATIC,
        PM_ERR_NAME,
        PM_ERR_AGAIN,
        PM_ERR_GENERIC,
        PMNS_LEAF_STATUS,
        PMNS_NONLEAF_STATUS,
        PM_RESULT_VSET_OFFSET,
        size_of::<pmValueSet>(),
        offset_of!(pmValueSet, vlist),
        offset_of!(pmValueSet, valfmt),
        size_of::<pmValue>(),
        offset_of!(pmValue, value),
        value_block_header(12, PM_TYPE_U64),
        PM_VAL_INSITU,
        PM_VAL_DPTR,
        PM_VAL_HDR_SIZE,
        PM_ERR_TYPE,
        PM_TYPE_32,
        offset_of!(pmdaExt, e_resultCallBack),
        PMDA_CACHE_LOAD,
        PMDA_CACHE_ADD,
        PMDA_CACHE_CULL,
        PMDA_CACHE_SAVE,
        PMDA_CACHE_ACTIVE,
        PMDA_CACHE_INACTIVE,
        PMDA_CACHE_WALK_REWIND,
        PMDA_CACHE_WALK_NEXT,
    );
    assert_eq!(out, want);
}
