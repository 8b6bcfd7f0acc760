select 1 as id, 'paid' as status
