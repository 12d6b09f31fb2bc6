-- cap_request_size.lua: an isostack admission policy (docs/tenancy.md).
-- Caps the size of one request: at most 8 members, at most 16 GPUs or MIG
-- instances in all, at most 256 cores per member. Tenants tagged "large-jobs"
-- may ask for up to 64 GPUs. Returns true, or false and the reason.
local max_members, max_gpus, max_cpus = 8, 16, 256

for _, tag in ipairs(request.tags) do
  if tag == "large-jobs" then max_gpus = 64 end
end

if request.members > max_members then
  return false, string.format("at most %d members per request, asked for %d",
                              max_members, request.members)
end
local gpus = request.members * request.gpus.count
if gpus > max_gpus then
  return false, string.format("at most %d GPUs or MIG instances per request, asked for %d",
                              max_gpus, gpus)
end
if request.cpus > max_cpus then
  return false, string.format("at most %d cpus per member, asked for %d", max_cpus, request.cpus)
end
return true
