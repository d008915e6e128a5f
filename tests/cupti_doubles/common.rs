//! The CUPTI double (`gpu-tools-testing/doubles/cupti_activity.c`) loaded through the library with the driver double, its
//! controls, and one test at a time: `gpu_tools_testing::cupti_double_loader!`, expanded here so that it compiles
//! under this crate's features.

gpu_tools_testing::cupti_double_loader!();
