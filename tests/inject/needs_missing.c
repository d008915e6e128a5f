/* A library that needs another that is not there: dlopen of it fails in the target. */
int missing_function(void);
int test_agent_entry(const char *path) { (void)path; return missing_function(); }
