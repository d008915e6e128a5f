//! The CUPTI double (`gpu-tools-testing/doubles/cupti_activity.c`) loaded through the library with the driver
//! double, its controls, and one test at a time: `gpu_tools_testing::cupti_double_loader!`, as the library's tests
//! load it.
#![allow(dead_code)]

gpu_tools_testing::cupti_double_loader!();
