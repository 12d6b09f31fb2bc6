-- hipaa_exclusive_node.lua: an isostack admission policy (docs/tenancy.md).
-- Tenants tagged "hipaa" must not share a node with anyone: their requests
-- must ask for isolation "exclusive-node" or "exclusive-rack".
for _, tag in ipairs(request.tags) do
  if tag == "hipaa" then
    if request.isolation ~= "exclusive-node" and request.isolation ~= "exclusive-rack" then
      return false, "tenant " .. request.tenant ..
        " is tagged hipaa: requests need isolation exclusive-node or exclusive-rack, not " ..
        request.isolation
    end
  end
end
return true
