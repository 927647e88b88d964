"""Images: rendering Dockerfiles, assembling build contexts, building (BuildKit or the legacy
builder), tagging, pushing, verifying, bake files, SBOMs and the `lock` flow."""
