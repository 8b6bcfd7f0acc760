-- an ordinary model: the build has something to capture
select 1 as id, 'paid' as status
